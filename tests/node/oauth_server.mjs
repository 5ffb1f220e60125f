// An OAuth 2.0 authorization server for tests/test_mcp_oauth.py: oauth2-mock-server (npm, pinned
// in package.json), started through its own API as its README shows. It publishes OpenID
// discovery metadata and a JWK set, and issues RS256 JWTs at /token (client_credentials; the
// audience from the request's `aud`, the scopes from its `scope`). One hook, with its documented
// BeforeTokenSigning event: a client_credentials token names its client in `client_id` and `sub`
// (RFC 9068 2.2: the library leaves both out), and a request's `expires_in` sets the token's
// lifetime (negative: a token already expired, as the issuer would hand out after its time).
//
//   node oauth_server.mjs [PORT]     prints {"issuer": "http://127.0.0.1:PORT"} once listening

import { OAuth2Server, Events } from 'oauth2-mock-server';

const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');

server.service.on(Events.BeforeTokenSigning, (token, req) => {
  const body = req.body ?? {};
  const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '');
  const client = basic
    ? Buffer.from(basic[1], 'base64').toString().split(':')[0]
    : body.client_id;
  if (client) {
    token.payload.client_id = client;
    token.payload.sub = client;
  }
  if (body.expires_in !== undefined) {
    token.payload.exp = token.payload.iat + Number(body.expires_in);
  }
});

await server.start(Number(process.argv[2] ?? 0), '127.0.0.1');
server.issuer.url = `http://127.0.0.1:${server.address().port}`;
console.log(JSON.stringify({ issuer: server.issuer.url }));

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.stop().finally(() => process.exit(0)));
}
