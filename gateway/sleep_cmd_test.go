package gateway_test

import (
	"bytes"
	"strings"
	"testing"
)

// `gateway sleep` is the preStop hook of clusters without the sleep action:
// a valid duration exits 0, anything else exits 2 saying what it wants.
func TestSleepCommandWaitsOrRefusesWhatIsNoDuration(t *testing.T) {
	env := configEnv(map[string]string{})
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"sleep", "1ms"}, 0, ""},
		{[]string{"sleep", "0s"}, 0, ""},
		{[]string{"sleep", "5"}, 2, "want a Go duration"},
		{[]string{"sleep", "-1s"}, 2, "want a Go duration"},
		{[]string{"sleep", "1h"}, 2, "want a Go duration"},
		{[]string{"sleep"}, 2, "usage: gateway sleep DURATION"},
	} {
		var stderr bytes.Buffer
		if code := realMain(tc.args, env, &bytes.Buffer{}, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("gateway %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.code, tc.msg)
		}
	}
}
