import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";

/**
 * A real HTTP server on 127.0.0.1 answering like a release host (GitHub's REST shape, DESIGN §3
 * "Release host"): `GET {REPO}/releases/tags/{tag}` → `{tag_name, assets: [{name,
 * browser_download_url}]}` for the releases it holds, 404 `Not Found` for any other tag.
 */
export interface FakeReleaseHost {
  /** `SVC_RELEASE_API_URL` for this host. */
  apiUrl: string;
  /** Asset names by release tag; change it while the test runs. */
  releases: Map<string, string[]>;
  /** Paths asked for, in order. */
  requests: string[];
}

const REPO = "/repos/svc-mesh/svc";

/** Starts the host; it is closed after the test. */
export async function startReleaseHost(t: TestContext, releases: Record<string, string[]> = {}): Promise<FakeReleaseHost> {
  const host: FakeReleaseHost = { apiUrl: "", releases: new Map(Object.entries(releases)), requests: [] };
  const server: Server = createServer((req, res) => {
    const url = req.url ?? "";
    host.requests.push(url);
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify(body));
    };
    const prefix = `${REPO}/releases/tags/`;
    const tag = req.method === "GET" && url.startsWith(prefix) ? decodeURIComponent(url.slice(prefix.length)) : undefined;
    const names = tag === undefined ? undefined : host.releases.get(tag);
    if (tag === undefined || names === undefined) return send(404, { message: "Not Found", documentation_url: "https://docs.github.com/rest/releases/releases" });
    const assets = names.map((name, i) => ({ id: i + 1, name, size: 1, browser_download_url: `https://github.com/svc-mesh/svc/releases/download/${tag}/${name}` }));
    return send(200, { id: 1, tag_name: tag, name: tag, draft: false, prerelease: false, assets });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  host.apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}${REPO}`;
  return host;
}
