// Preloaded into the Node relay by scripts/relaybench-pin -p (node --require): V8's sampling CPU
// profiler — the one `node --cpu-prof` runs for a whole process — started at the first SIGUSR2 and
// stopped at the second, so that the profile covers the load's window only. The profile (the
// .cpuprofile format of --cpu-prof) is written to NODE_PROF_OUT.
'use strict';
const fs = require('node:fs');
const inspector = require('node:inspector');

const out = process.env.NODE_PROF_OUT;
if (out) {
  const session = new inspector.Session();
  session.connect();
  let running = false;
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      // 1 ms, as --cpu-prof-interval's default.
      session.post('Profiler.enable', () =>
        session.post('Profiler.setSamplingInterval', { interval: 1000 }, () => session.post('Profiler.start')));
      return;
    }
    running = false;
    session.post('Profiler.stop', (err, res) => {
      if (err) {
        console.error('relaybench-nodeprof:', err);
        return;
      }
      fs.writeFileSync(out, JSON.stringify(res.profile));
    });
  });
}
