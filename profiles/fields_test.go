package profiles

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The error for a file that is not a profile lists the fields a profile
// file has: every JSON field of Profile, and budgets.
func TestTheFieldsNamedInErrorsAreTheProfileFileFields(t *testing.T) {
	var want []string
	typ := reflect.TypeFor[Profile]()
	for i := range typ.NumField() {
		if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			want = append(want, name)
		}
	}
	want = append(want, "budgets")
	got := strings.Split(fields, ", ")
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("fields %q, want the profile file's fields %q", got, want)
	}
}
