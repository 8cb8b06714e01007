import assert from "node:assert/strict";
import { test } from "node:test";
import { isLoopbackHost, isLoopbackUrl } from "../../src/lib/loopback.js";

test("loopback hosts: localhost and *.localhost (RFC 6761), 127.0.0.0/8, ::1, the unspecified addresses, IPv4-mapped loopback", () => {
  for (const url of [
    "http://localhost:8080",
    "http://LOCALHOST",
    "http://localhost.:8080",
    "https://svc.localhost",
    "http://127.0.0.1:8080",
    "http://127.3.2.1",
    "http://[::1]:8080",
    "http://0.0.0.0:8080",
    "http://[::]:8080",
    "http://[::ffff:127.0.0.1]",
  ]) {
    assert.equal(isLoopbackUrl(url), true, url);
  }
});

test("hosts other machines can reach are not loopback; neither is a string that is not a URL", () => {
  for (const url of ["https://mesh.example.com", "http://192.0.2.10:8080", "http://10.0.0.1", "http://[2001:db8::1]", "http://localhost-gw.example.net", "http://128.0.0.1", "not a url"]) {
    assert.equal(isLoopbackUrl(url), false, url);
  }
  assert.equal(isLoopbackHost("[::1]"), true);
  assert.equal(isLoopbackHost("mesh.example.com"), false);
});
