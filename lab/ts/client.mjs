// The seamwatch lab's client on the official TypeScript SDK (@modelcontextprotocol/sdk).
//
// Client + StreamableHTTPClientTransport as an application uses them, against a lab server
// through the proxy. It initializes (the transport then opens its standalone GET stream), lists
// the tools, calls one tool with a progress callback (`--tool`, `--tool-args`: `slow_report`
// by default), lets the transport resume that call's stream itself if the server ends it before
// the result (a GET with Last-Event-ID after the server's `retry`), calls a read-only tool
// (`--read-tool`, `--read-args`: `get_balance` of the official SDK server by default), ends the
// session (DELETE) and prints one JSON line of notes on stdout.
//
// `--gate NAME` opens the official SDK server's gate NAME directly (not through the proxy) once
// progress 1 arrived (`slow_report` with `close_after: 1` closes its stream there).
// `--timeout-ms` bounds the call (reset by each progress notification); with `--retry-call` a
// call that failed (a timeout, say) is sent once more with the same arguments, as an
// application that retries does. `--settle-ms` waits that long after connecting, so that the
// transport's standalone GET (sent without waiting) reaches the server before the next request
// (a scenario behind a round-robin balancer counts requests).
//
//   node lab/ts/client.mjs --url http://127.0.0.1:P/mcp --control http://127.0.0.1:Q
//       [--tool slow_report --tool-args '{"steps": 3, "close_after": 1}'] [--gate slow-report]
//       [--timeout-ms 15000] [--retry-call] [--settle-ms 300]
//       [--read-tool lookup --read-args '{"key": "k"}']

import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const { values: options } = parseArgs({
  options: {
    url: { type: 'string' },
    control: { type: 'string' },
    tool: { type: 'string', default: 'slow_report' },
    'tool-args': { type: 'string', default: '{"steps": 3}' },
    gate: { type: 'string' },
    'timeout-ms': { type: 'string', default: '15000' },
    'retry-call': { type: 'boolean', default: false },
    'settle-ms': { type: 'string', default: '0' },
    'read-tool': { type: 'string', default: 'get_balance' },
    'read-args': { type: 'string', default: '{"account": "acme"}' },
  },
});
if (!options.url || !options.control) {
  console.error(
    'usage: node client.mjs --url MCP_URL --control SERVER_ROOT [--tool NAME --tool-args JSON] ' +
      '[--gate NAME] [--timeout-ms MS] [--retry-call] [--settle-ms MS] ' +
      '[--read-tool NAME --read-args JSON]',
  );
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(options.url));
const client = new Client({ name: 'seamwatch-lab-ts-client', version: '1' });
await client.connect(transport);
await delay(Number(options['settle-ms']));
const tools = await client.listTools();

const progressSeen = [];
const attempts = [];
async function call() {
  const result = await client.callTool(
    { name: options.tool, arguments: JSON.parse(options['tool-args']) },
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
      timeout: Number(options['timeout-ms']),
    },
  );
  attempts.push('result');
  return result;
}
let report;
try {
  report = await call();
} catch (error) {
  attempts.push(`failed: ${error.message}`);
  if (!options['retry-call']) throw error;
  report = await call();
}
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
    attempts,
    progress_seen: progressSeen,
    report: report.content?.[0]?.text ?? null,
    report_is_error: report.isError ?? false,
    read: read.content?.[0]?.text ?? null,
    read_is_error: read.isError ?? false,
  }),
);
