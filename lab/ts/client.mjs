// The seamwatch lab's client on the official TypeScript SDK (@modelcontextprotocol/sdk).
//
// Client + StreamableHTTPClientTransport as an application uses them, against a lab server
// through the proxy. It initializes (the transport then opens its standalone GET stream), lists
// the tools, calls `slow_report` with a progress callback, lets the transport resume that
// stream itself if the server closes it before the result (a GET with Last-Event-ID after the
// server's `retry`), calls a read-only tool (`--read-tool`, `--read-args`: `get_balance` of
// the official SDK server by default), ends the session (DELETE) and prints one JSON line of
// notes on stdout. `--close-after K` asks the official SDK server to close the tool's stream
// after progress K (its `close_after` argument); `--gate NAME` opens that server's gate NAME
// directly (not through the proxy) once progress 1 arrived, which is when it may close.
//
//   node lab/ts/client.mjs --url http://127.0.0.1:P/mcp --control http://127.0.0.1:Q
//                          [--steps 3] [--close-after 1] [--gate slow-report]
//                          [--read-tool lookup --read-args '{"key": "k"}']

import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const { values: options } = parseArgs({
  options: {
    url: { type: 'string' },
    control: { type: 'string' },
    steps: { type: 'string', default: '3' },
    'close-after': { type: 'string' },
    gate: { type: 'string' },
    'read-tool': { type: 'string', default: 'get_balance' },
    'read-args': { type: 'string', default: '{"account": "acme"}' },
  },
});
if (!options.url || !options.control) {
  console.error(
    'usage: node client.mjs --url MCP_URL --control SERVER_ROOT [--steps N] [--close-after K] ' +
      '[--gate NAME] [--read-tool NAME --read-args JSON]',
  );
  process.exit(2);
}
const reportArguments = { steps: Number(options.steps) };
if (options['close-after']) reportArguments.close_after = Number(options['close-after']);

const transport = new StreamableHTTPClientTransport(new URL(options.url));
const client = new Client({ name: 'seamwatch-lab-ts-client', version: '1' });
await client.connect(transport);
const tools = await client.listTools();

const progressSeen = [];
const report = await client.callTool(
  { name: 'slow_report', arguments: reportArguments },
  undefined,
  {
    onprogress: async (progress) => {
      progressSeen.push(progress.progress);
      if (progress.progress === 1 && options.gate) {
        const gate = `${options.control}/lab/gates/${options.gate}`;
        const opened = await fetch(gate, { method: 'POST' });
        if (!opened.ok) throw new Error(`${gate}: HTTP ${opened.status}`);
      }
    },
    resetTimeoutOnProgress: true,
    timeout: 15000,
  },
);
const read = await client.callTool({
  name: options['read-tool'],
  arguments: JSON.parse(options['read-args']),
});
const protocolVersion = transport.protocolVersion;
await transport.terminateSession();
await client.close();

console.log(
  JSON.stringify({
    protocol_version: protocolVersion,
    tools: tools.tools.map((tool) => tool.name).sort(),
    progress_seen: progressSeen,
    report: report.content?.[0]?.text ?? null,
    report_is_error: report.isError ?? false,
    read: read.content?.[0]?.text ?? null,
    read_is_error: read.isError ?? false,
  }),
);
