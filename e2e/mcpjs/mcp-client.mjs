// Drives an agent's MCP face with the official MCP TypeScript SDK client, for
// ../mcpface_test.go: node mcp-client.mjs URL API_KEY. It prints one JSON
// object with what each step saw; the Go test judges it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, apiKey] = process.argv.slice(2);
const out = {};

function connect(headers) {
  const client = new Client({ name: "handoff-e2e", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  return client.connect(transport).then(() => client);
}

// Without credentials the agent refuses before any MCP exchange.
try {
  const c = await connect({});
  out.anonymous = { connected: true };
  await c.close();
} catch (err) {
  out.anonymous = { connected: false, error: String(err && err.message || err) };
}

const client = await connect({ "X-API-Key": apiKey });
const { tools } = await client.listTools();
out.tools = tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));

out.echo = await client.callTool({ name: "echo", arguments: { text: "hello over mcp" } });
out.stats = await client.callTool({ name: "stats", arguments: {} });

// Progress: the task's status updates, for a call that sent a token.
const progress = [];
out.slow = await client.callTool(
  { name: "slow", arguments: { data: { ms: 300 } } },
  undefined,
  { onprogress: (p) => progress.push(p), timeout: 30000 },
);
out.progress = progress;

out.approval = await client.callTool({ name: "write-note", arguments: { data: { name: "n1", text: "secret text" } } });

// Cancellation: abort a long call; the SDK sends notifications/cancelled.
const abort = new AbortController();
const long = client.callTool(
  { name: "slow", arguments: { data: { ms: 60000 } } },
  undefined,
  // Abort once the task is working, as a person would press stop.
  // Abort once the task works, as a person pressing stop would.
  { signal: abort.signal, timeout: 90000, onprogress: () => setTimeout(() => abort.abort("test cancels"), 100) },
);
try {
  await long;
  out.cancel = { rejected: false };
} catch (err) {
  out.cancel = { rejected: true, error: String(err && err.message || err) };
}

// The SDK sends notifications/cancelled without waiting for it; closing at
// once can abort that POST, and a task whose caller only went away keeps
// working (as over A2A), so give it a moment to leave.
await new Promise((resolve) => setTimeout(resolve, 500));
await client.close();
console.log(JSON.stringify(out));
