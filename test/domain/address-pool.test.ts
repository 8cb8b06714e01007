import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { test } from "node:test";
import ipaddr from "ipaddr.js";
import { isAppError } from "../../src/errors.js";
import {
  allocateAddress,
  ipv4ToNumber,
  isAddressInNetwork,
  isHostAddress,
  parseNetworkCidr,
} from "../../src/domain/address-pool.js";

test("parseNetworkCidr normalizes host bits away", () => {
  assert.deepEqual(parseNetworkCidr("10.0.0.7/24"), { cidr: "10.0.0.0/24", network: "10.0.0.0", prefixLength: 24 });
  assert.deepEqual(parseNetworkCidr("10.0.0.0/24"), { cidr: "10.0.0.0/24", network: "10.0.0.0", prefixLength: 24 });
  assert.deepEqual(parseNetworkCidr("172.16.200.9/12"), { cidr: "172.16.0.0/12", network: "172.16.0.0", prefixLength: 12 });
  assert.deepEqual(parseNetworkCidr("192.168.1.255/30"), { cidr: "192.168.1.252/30", network: "192.168.1.252", prefixLength: 30 });
  assert.deepEqual(parseNetworkCidr("10.255.255.255/8"), { cidr: "10.0.0.0/8", network: "10.0.0.0", prefixLength: 8 });
});

test("parseNetworkCidr rejects IPv6, garbage and prefix lengths outside 8..30 with VALIDATION_FAILED", () => {
  for (const bad of [
    "fd00::/64",
    "::1/128",
    "",
    "garbage",
    "10.0.0.0",
    "10.0.0.0/",
    "10.0.0.0/31",
    "10.0.0.0/32",
    "10.0.0.0/7",
    "10.0.0.0/0",
    "10.0.0.0/024",
    "10.0.0.0/24 ",
    "10.0.0.0/+24",
    "10.0.0.256/24",
    "010.0.0.0/24", // would be octal to ipaddr.js
    "10.1/16", // short form
    "0x0a.0.0.0/8",
    "10.0.0.0/24\n",
    "10.0.0.0/24/24",
  ]) {
    assert.throws(
      () => parseNetworkCidr(bad),
      (err) => isAppError(err, "VALIDATION_FAILED") && err.message.includes("network_cidr"),
      JSON.stringify(bad),
    );
  }
});

test("parseNetworkCidr says why an IPv6 network is refused", () => {
  assert.throws(() => parseNetworkCidr("fd00::/64"), /only IPv4 networks are supported/);
  assert.throws(() => parseNetworkCidr("10.0.0.0/31"), /prefix length must be 8\.\.30/);
});

test("allocateAddress hands out the lowest free host address, never the network address", () => {
  assert.equal(allocateAddress("10.0.0.0/24", []), "10.0.0.1");
  assert.equal(allocateAddress("10.0.0.0/24", ["10.0.0.1"]), "10.0.0.2");
  assert.equal(allocateAddress("10.0.0.0/24", ["10.0.0.2", "10.0.0.1", "10.0.0.3"]), "10.0.0.4");
  assert.equal(allocateAddress("10.0.0.77/24", []), "10.0.0.1", "cidr is normalized first");
});

test("allocateAddress reuses gaps left by removed nodes", () => {
  assert.equal(allocateAddress("10.0.0.0/24", ["10.0.0.1", "10.0.0.3", "10.0.0.4"]), "10.0.0.2");
  assert.equal(allocateAddress("10.0.0.0/24", ["10.0.0.2", "10.0.0.3"]), "10.0.0.1");
});

test("allocateAddress ignores used entries outside the network and duplicates", () => {
  assert.equal(allocateAddress("10.0.0.0/24", ["10.0.1.1", "192.168.0.1", "10.0.0.1", "10.0.0.1"]), "10.0.0.2");
});

test("allocateAddress refuses a malformed used entry rather than risk a duplicate", () => {
  assert.throws(
    () => allocateAddress("10.0.0.0/24", ["10.0.0.1/32"]),
    (err) => isAppError(err, "VALIDATION_FAILED"),
  );
});

test("allocateAddress exhausts a /30 after 2 hosts with ADDRESS_POOL_EXHAUSTED {network_cidr}", () => {
  const cidr = "192.168.7.5/30";
  const first = allocateAddress(cidr, []);
  const second = allocateAddress(cidr, [first]);
  assert.deepEqual([first, second], ["192.168.7.5", "192.168.7.6"]);
  assert.throws(
    () => allocateAddress(cidr, [first, second]),
    (err) =>
      isAppError(err, "ADDRESS_POOL_EXHAUSTED") &&
      err.status === 409 &&
      JSON.stringify(err.details) === JSON.stringify({ network_cidr: "192.168.7.4/30" }),
  );
});

test("allocateAddress never hands out the broadcast address", () => {
  const used = Array.from({ length: 253 }, (_, i) => `10.9.9.${i + 1}`);
  assert.equal(allocateAddress("10.9.9.0/24", used), "10.9.9.254");
  assert.throws(
    () => allocateAddress("10.9.9.0/24", [...used, "10.9.9.254"]),
    (err) => isAppError(err, "ADDRESS_POOL_EXHAUSTED"),
  );
});

// No timed assertion (STYLE: benchmarks live in scripts/bench/); the runner timeout only catches
// a quadratic implementation, which would take minutes here.
test("allocateAddress handles a /16 with 60k used entries", { timeout: 10_000 }, () => {
  const used: string[] = [];
  for (let n = 1; n <= 60_000; n++) used.push(`10.20.${n >> 8}.${n & 255}`);
  // Host number 60001 is 10.20.234.97 (60001 = 234 * 256 + 97).
  assert.equal(allocateAddress("10.20.0.0/16", used), "10.20.234.97");
  // A gap low in the pool is found first.
  assert.equal(allocateAddress("10.20.0.0/16", used.filter((a) => a !== "10.20.3.7")), "10.20.3.7");
});

test("isAddressInNetwork includes network and broadcast; isHostAddress excludes them", () => {
  const cidr = "10.0.0.0/24";
  assert.equal(isAddressInNetwork("10.0.0.0", cidr), true);
  assert.equal(isAddressInNetwork("10.0.0.255", cidr), true);
  assert.equal(isAddressInNetwork("10.0.0.9", cidr), true);
  assert.equal(isAddressInNetwork("10.0.1.9", cidr), false);
  assert.equal(isHostAddress("10.0.0.0", cidr), false);
  assert.equal(isHostAddress("10.0.0.255", cidr), false);
  assert.equal(isHostAddress("10.0.0.1", cidr), true);
  assert.equal(isHostAddress("10.0.0.254", cidr), true);
  assert.equal(isHostAddress("9.255.255.255", cidr), false);
});

test("isAddressInNetwork / isHostAddress give false for malformed addresses and throw on a bad cidr", () => {
  for (const bad of ["", "10.0.0", "10.0.0.01", "fd00::1", "10.0.0.1/32", " 10.0.0.1"]) {
    assert.equal(isAddressInNetwork(bad, "10.0.0.0/24"), false, JSON.stringify(bad));
    assert.equal(isHostAddress(bad, "10.0.0.0/24"), false, JSON.stringify(bad));
  }
  assert.throws(() => isHostAddress("10.0.0.1", "10.0.0.0/32"), (err) => isAppError(err, "VALIDATION_FAILED"));
  assert.throws(() => isAddressInNetwork("10.0.0.1", "fd00::/64"), (err) => isAppError(err, "VALIDATION_FAILED"));
});

test("ipv4ToNumber accepts exactly what ipaddr.js accepts as a four-part decimal, with the same value", () => {
  const samples = ["0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", " 1.2.3.4", "1.2.3.4\n", "a.b.c.d", "1.2.3.-4"];
  for (let i = 0; i < 20000; i++) samples.push([0, 0, 0, 0].map(() => String(randomInt(0, 300))).join("."));
  for (const s of samples) {
    const expected = ipaddr.IPv4.isValidFourPartDecimal(s)
      ? ipaddr.IPv4.parse(s).octets.reduce((acc, o) => acc * 256 + o, 0)
      : undefined;
    assert.equal(ipv4ToNumber(s), expected, JSON.stringify(s));
  }
});
