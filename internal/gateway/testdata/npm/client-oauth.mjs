// A real OAuth client for the gateway's tests: the TypeScript MCP SDK's
// client auth (OAuthClientProvider, auth()) over streamable HTTP, driven by
// JSON lines on stdin, answering on stdout.
//
//   node client-oauth.mjs URL REDIRECT_URL
//
// stdout: {"authorize":URL} when the human must consent; stdin then gives
// {"code":"…"} from the redirect. After that:
// stdin:  {"op":"list"} | {"op":"call","tool":"…","args":{…}} | {"op":"refresh"}
// stdout: {"tools":[…]} | {"result":{…}} | {"refreshed":bool} | {"error":"…"} | {"authorize":URL}
import readline from "node:readline";
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { auth, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url, redirectUrl] = process.argv.slice(2);
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (v) => process.stdout.write(JSON.stringify(v) + "\n");
const next = async () => {
  const { value, done } = await lines.next();
  if (done) process.exit(0);
  return JSON.parse(value);
};

// Everything the provider keeps is in memory: a fresh client each run.
const store = {};
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK test client",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  state: () => randomBytes(16).toString("hex"),
  clientInformation: () => store.client,
  saveClientInformation: (c) => { store.client = c; },
  tokens: () => store.tokens,
  saveTokens: (t) => { store.tokens = t; },
  redirectToAuthorization: (u) => { say({ authorize: u.toString() }); },
  saveCodeVerifier: (v) => { store.verifier = v; },
  codeVerifier: () => store.verifier,
  invalidateCredentials: (scope) => {
    if (scope === "all" || scope === "client") delete store.client;
    if (scope === "all" || scope === "tokens") delete store.tokens;
  },
};

// connect connects, and when the server wants OAuth, waits for the code
// the test brings back from the browser and connects again.
async function connect() {
  for (let attempt = 0; attempt < 2; attempt++) {
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    const client = new Client({ name: "ts-oauth-client", version: "1.0.0" }, { capabilities: {} });
    try {
      await client.connect(transport);
      return client;
    } catch (e) {
      if (!(e instanceof UnauthorizedError)) throw e;
      const { code } = await next();
      await transport.finishAuth(code);
    }
  }
  throw new Error("not authorized after the consent");
}

let client;
try {
  client = await connect();
  say({ connected: client.getServerVersion()?.name ?? "" });
} catch (e) {
  say({ error: String(e?.message ?? e) });
  process.exit(1);
}

for (;;) {
  const cmd = await next();
  try {
    if (cmd.op === "list") {
      const { tools } = await client.listTools();
      say({ tools });
    } else if (cmd.op === "call") {
      const result = await client.callTool({ name: cmd.tool, arguments: cmd.args ?? {} });
      say({ result });
    } else if (cmd.op === "refresh") {
      // What the transport does on a 401 with a refresh token in hand.
      const before = store.tokens?.access_token;
      const outcome = await auth(provider, { serverUrl: new URL(url) });
      say({ refreshed: outcome === "AUTHORIZED" && !!store.tokens && store.tokens.access_token !== before });
    }
  } catch (e) {
    say({ error: String(e?.message ?? e) });
  }
}
