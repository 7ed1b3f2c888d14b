// The seamwatch lab's client on the official TypeScript SDK (@modelcontextprotocol/sdk).
//
// Client + StreamableHTTPClientTransport as an application uses them, against the lab's
// official-SDK (Python) server through the proxy. It initializes (the transport then opens its
// standalone GET stream), lists the tools, calls `slow_report` with `close_after: 1` and a
// progress callback (on progress 1 it opens the server's gate "slow-report" directly, not
// through the proxy, so the server closes the tool's stream there), lets the transport resume
// that stream itself (a GET with Last-Event-ID after the server's `retry`), calls
// `get_balance`, ends the session (DELETE) and prints one JSON line of notes on stdout.
//
//   node lab/ts/client.mjs --url http://127.0.0.1:P/mcp --control http://127.0.0.1:Q

import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const { values: options } = parseArgs({
  options: {
    url: { type: 'string' },
    control: { type: 'string' },
    steps: { type: 'string', default: '3' },
  },
});
if (!options.url || !options.control) {
  console.error('usage: node client.mjs --url MCP_URL --control SERVER_ROOT [--steps N]');
  process.exit(2);
}
const steps = Number(options.steps);

const transport = new StreamableHTTPClientTransport(new URL(options.url));
const client = new Client({ name: 'seamwatch-lab-ts-client', version: '1' });
await client.connect(transport);
const tools = await client.listTools();

const progressSeen = [];
const report = await client.callTool(
  { name: 'slow_report', arguments: { steps, close_after: 1 } },
  undefined,
  {
    onprogress: async (progress) => {
      progressSeen.push(progress.progress);
      if (progress.progress === 1) {
        const opened = await fetch(`${options.control}/lab/gates/slow-report`, { method: 'POST' });
        if (!opened.ok) throw new Error(`gate slow-report: HTTP ${opened.status}`);
      }
    },
    resetTimeoutOnProgress: true,
    timeout: 15000,
  },
);
const balance = await client.callTool({ name: 'get_balance', arguments: { account: 'acme' } });
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
    balance: balance.content?.[0]?.text ?? null,
  }),
);
