// Runs the demo page's DOM-free formatting (format.js) under Node for
// format_node_test.go. Prints JSON. (The client package's modules have their
// own tests: clients/js/test, run with node --test.)
import { compactArgs, formatDuration, formatRemaining } from "./format.js";

const [mode, arg] = process.argv.slice(2);
const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");

switch (mode) {
  case "format": {
    const { args, durations, remaining } = JSON.parse(arg);
    out({
      args: args.map((a) => compactArgs(a)),
      durations: durations.map((ms) => formatDuration(ms)),
      remaining: remaining.map((ms) => formatRemaining(ms)),
    });
    break;
  }
  default:
    process.exit(4);
}
