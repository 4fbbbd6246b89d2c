// A real downstream client for the gateway's tests: the TypeScript MCP SDK
// over streamable HTTP, driven by JSON lines on stdin, answering on stdout.
//
//   node client.mjs URL KEY [elicit | elicit-nohandler | elicit-throws | sample-elicit]
//
// elicit declares elicitation and asks stdin for each answer; sample-elicit
// declares sampling too and asks stdin for each sampled message as well.
// elicit-nohandler declares elicitation with no handler (the SDK answers
// -32601); elicit-throws declares it with a handler that throws.
// stdin:  {"op":"list"} | {"op":"call","tool":"…","args":{…}}
//         | {"op":"resources"} | {"op":"templates"} | {"op":"read","uri":"…"}
//         | {"op":"prompts"} | {"op":"prompt","name":"…","args":{…}}
//         | {"op":"complete","ref":{…},"argument":{…},"context":{…}}
//         | {"action":"accept","content":{…}} (answer to an elicitation)
//         | {"text":"…"} (answer to a sampling request)
// stdout: {"tools":[…]} | {"result":{…}} | {"error":"…"}
//         | {"elicit":{…}} | {"sample":{…}} (then waits for an answer line)
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, key, mode] = process.argv.slice(2);
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (v) => process.stdout.write(JSON.stringify(v) + "\n");
const next = async () => {
  const { value, done } = await lines.next();
  if (done) process.exit(0);
  return JSON.parse(value);
};

const capabilities = {};
if (mode?.startsWith("elicit") || mode === "sample-elicit") capabilities.elicitation = { form: {} };
if (mode === "sample-elicit") capabilities.sampling = {};
const client = new Client({ name: "ts-test-client", version: "1.0.0" }, { capabilities });
if (mode === "elicit-throws") {
  client.setRequestHandler(ElicitRequestSchema, async () => {
    throw new Error("this client cannot ask its user");
  });
}
if (mode === "elicit" || mode === "sample-elicit") {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    say({ elicit: req.params });
    const answer = await next();
    return { action: answer.action, content: answer.action === "accept" ? (answer.content ?? {}) : undefined };
  });
}
if (mode === "sample-elicit") {
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    say({ sample: req.params });
    const answer = await next();
    return { model: "ts-test-model", role: "assistant", content: { type: "text", text: answer.text } };
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
    } else if (cmd.op === "resources") {
      say(await client.listResources());
    } else if (cmd.op === "templates") {
      say(await client.listResourceTemplates());
    } else if (cmd.op === "read") {
      say(await client.readResource({ uri: cmd.uri }));
    } else if (cmd.op === "prompts") {
      say(await client.listPrompts());
    } else if (cmd.op === "prompt") {
      say(await client.getPrompt({ name: cmd.name, arguments: cmd.args ?? {} }));
    } else if (cmd.op === "complete") {
      say(await client.complete({ ref: cmd.ref, argument: cmd.argument, context: cmd.context }));
    } else {
      say({ error: `unknown op ${JSON.stringify(cmd.op)}` });
    }
  } catch (e) {
    say({ error: String(e?.message ?? e) });
  }
}
