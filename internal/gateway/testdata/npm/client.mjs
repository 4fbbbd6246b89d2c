// A real downstream client for the gateway's tests: the TypeScript MCP SDK
// over streamable HTTP, driven by JSON lines on stdin, answering on stdout.
//
//   node client.mjs URL KEY [elicit | elicit-nohandler | elicit-throws]
//
// elicit-nohandler declares elicitation with no handler (the SDK answers
// -32601); elicit-throws declares it with a handler that throws.
// stdin:  {"op":"list"} | {"op":"call","tool":"…","args":{…}} | {"action":"accept"} (answer to an elicitation)
// stdout: {"tools":[…]} | {"result":{…}} | {"error":"…"} | {"elicit":{…}} (then waits for an answer line)
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, key, mode] = process.argv.slice(2);
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (v) => process.stdout.write(JSON.stringify(v) + "\n");
const next = async () => {
  const { value, done } = await lines.next();
  if (done) process.exit(0);
  return JSON.parse(value);
};

const client = new Client(
  { name: "ts-test-client", version: "1.0.0" },
  { capabilities: mode?.startsWith("elicit") ? { elicitation: { form: {} } } : {} },
);
if (mode === "elicit-throws") {
  client.setRequestHandler(ElicitRequestSchema, async () => {
    throw new Error("this client cannot ask its user");
  });
}
if (mode === "elicit") {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    say({ elicit: req.params });
    const answer = await next();
    return { action: answer.action, content: answer.action === "accept" ? {} : undefined };
  });
}
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
await client.connect(transport);
say({ connected: client.getServerVersion()?.name ?? "" });

for (;;) {
  const cmd = await next();
  try {
    if (cmd.op === "list") {
      const { tools } = await client.listTools();
      say({ tools });
    } else if (cmd.op === "call") {
      const result = await client.callTool({ name: cmd.tool, arguments: cmd.args ?? {} });
      say({ result });
    }
  } catch (e) {
    say({ error: String(e?.message ?? e) });
  }
}
