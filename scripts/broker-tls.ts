/**
 * Certificate files for an external broker's TLS listener (spec §1.9 bullet 2), made the way the
 * backend makes its embedded listener's: a CA (10 years) and a server certificate (2 years) for
 * the public MQTT host plus localhost and 127.0.0.1, ECDSA P-256, keys mode 0600 in a 0700
 * directory (`src/mqtt/tls.ts` `ensureGeneratedTls`). Run again, it keeps the CA and renews the
 * server certificate when it is near expiry or names another host.
 *
 *   npx tsx scripts/broker-tls.ts --dir /etc/mosquitto/certs/svc --host mqtt.example.org
 *
 * Writes ca.pem, ca.key, server.pem and server.key: the broker serves server.pem/server.key
 * (deploy/mosquitto/conf.d/svc-tls.conf, docker-compose.yml's EMQX TLS listener), and the
 * backend gets ca.pem as SVC_MQTT_TLS_CA_FILE, which bind profiles carry. Keep ca.key off the
 * broker host if you can: only the next renewal needs it.
 */
import { parseArgs } from "node:util";
import { createLogger } from "../src/logger.js";
import { ensureGeneratedTls, GENERATED_FILES } from "../src/mqtt/tls.js";

const { values } = parseArgs({ options: { dir: { type: "string" }, host: { type: "string" } } });
if (values.dir === undefined || values.host === undefined) {
  process.stderr.write("usage: npx tsx scripts/broker-tls.ts --dir <directory> --host <public MQTT host>\n");
  process.exit(2);
}
const material = await ensureGeneratedTls({ dir: values.dir, publicHost: values.host, now: Date.now(), log: createLogger("warn") });
process.stdout.write(
  `${material.source} TLS files in ${values.dir}: ${GENERATED_FILES.caCert} (SVC_MQTT_TLS_CA_FILE), ${GENERATED_FILES.serverCert} and ${GENERATED_FILES.serverKey} (the broker's listener)\n`,
);
