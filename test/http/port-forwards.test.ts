import assert from "node:assert/strict";
import { test } from "node:test";
import { assertError, createConfig, createNode, startHarness } from "./harness.js";

test("port forwards render as PostUp/PostDown rules and follow enable, change and delete", async (t) => {
  const h = await startHarness(t);
  const config = await createConfig(h);
  const gw = await createNode(h, config.config_id, { public_address: "192.0.2.1" });
  const app = await createNode(h, config.config_id, { public_address: "192.0.2.2" });
  const base = `/api/v1/configs/${config.config_id}/nodes/${gw.node_id}/port-forwards`;
  const text = async () => (await h.req("GET", `/api/v1/configs/${config.config_id}/nodes/${gw.node_id}/config`)).json.config_text as string;

  const created = await h.req("POST", base, { protocol: "tcp", listen_port: 8443, target_address: app.address, target_port: 443 });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.json.enabled, true);
  const up = `PostUp = iptables -t nat -A PREROUTING -p tcp --dport 8443 -j DNAT --to-destination ${app.address}:443`;
  const down = `PostDown = iptables -t nat -D PREROUTING -p tcp --dport 8443 -j DNAT --to-destination ${app.address}:443`;
  assert.ok((await text()).includes(up), await text());
  assert.ok((await text()).includes(down));
  assert.deepEqual((await h.req("GET", base)).json.port_forwards, [created.json]);

  const before = h.fingerprint();
  assertError(await h.req("POST", base, { protocol: "tcp", listen_port: 8443, target_address: app.address, target_port: 80 }), "CONFLICT");
  assertError(await h.req("POST", base, { protocol: "sctp", listen_port: 1, target_address: app.address, target_port: 1 }), "VALIDATION_FAILED");
  assertError(await h.req("POST", base, { protocol: "tcp", listen_port: 1, target_address: "host.example", target_port: 1 }), "VALIDATION_FAILED");
  assertError(await h.req("POST", base, { protocol: "tcp", listen_port: 1, target_address: app.address, target_port: 70000 }), "VALIDATION_FAILED");
  // A DNAT target must be an address a host can hold.
  for (const target of ["0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.255", "255.255.255.255"]) {
    assertError(await h.req("POST", base, { protocol: "tcp", listen_port: 2, target_address: target, target_port: 1 }), "VALIDATION_FAILED");
  }
  assert.equal(h.fingerprint(), before);

  // The same port over UDP is another forward.
  const udp = await h.req("POST", base, { protocol: "udp", listen_port: 8443, target_address: app.address, target_port: 443 });
  assert.equal(udp.status, 201);
  assertError(await h.req("PATCH", `${base}/${udp.json.forward_id}`, { protocol: "tcp" }), "CONFLICT");

  const disabled = await h.req("PATCH", `${base}/${created.json.forward_id}`, { enabled: false });
  assert.equal(disabled.json.enabled, false);
  assert.ok(!(await text()).includes(up), "a disabled forward is not rendered");
  const moved = await h.req("PATCH", `${base}/${created.json.forward_id}`, { enabled: true, target_port: 8443 });
  assert.equal(moved.json.target_port, 8443);
  assert.ok((await text()).includes(`--to-destination ${app.address}:8443`));
  assert.equal((await h.req("DELETE", `${base}/${created.json.forward_id}`)).status, 204);
  assert.ok(!(await text()).includes("-p tcp"));
  assertError(await h.req("DELETE", `${base}/${created.json.forward_id}`), "NOT_FOUND");
  // A forward is reachable only under its own node.
  const otherBase = `/api/v1/configs/${config.config_id}/nodes/${app.node_id}/port-forwards`;
  assertError(await h.req("DELETE", `${otherBase}/${udp.json.forward_id}`), "NOT_FOUND");
});
