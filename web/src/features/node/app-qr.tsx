import QRCode from "qrcode";
import { useGate } from "../../api/roles.js";
import { useEffect, useRef, useState } from "react";
import { errorMessage } from "../../api/client.js";
import type { ConfigFormat, NodeAppConfigsAnswer } from "../../../../src/protocol/config-formats.js";
import { amneziaVpnQrChunksOfLink } from "../../../../src/protocol/amneziavpn-qr.js";
import { QueryView } from "../../components/states.js";
import { useAppConfigs } from "./queries.js";

type AppConfig = NodeAppConfigsAnswer["apps"][number];

/**
 * The largest QR code version the page draws. A phone camera reads a version-25 code (117×117
 * modules) off a laptop screen; AmneziaVPN's own chunks (850 compressed bytes, base64url) need
 * version 24. Beyond that the page says the config is too large instead of drawing a code no
 * phone reads.
 */
export const MAX_READABLE_QR_VERSION = 25;
/** Bytes a version-25 code holds at error correction level L in byte mode (ISO/IEC 18004 table 7). */
const BYTES_AT_MAX_VERSION = 1273;

/** Each app's name and where it scans a code. */
export const CLIENT_APPS: Record<ConfigFormat, { name: string; scan: string }> = {
  wireguard: { name: "WireGuard app", scan: "In the WireGuard app: + → Scan from QR code." },
  amneziawg: { name: "AmneziaWG app", scan: "In the AmneziaWG app: + → Scan from QR code." },
  amneziavpn: { name: "AmneziaVPN app", scan: "In the AmneziaVPN app: + → QR code." },
};

/**
 * The QR version a text needs at error correction level L, or Infinity when it needs more than a
 * QR code holds (version 40).
 */
export function qrVersionOf(text: string): number {
  try {
    return QRCode.create(text, { errorCorrectionLevel: "L" }).version;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/**
 * One QR code per client app of a static node (`GET …/config/apps`), each under the app's name:
 * the WireGuard app's (the config text; not offered for `awg_2`), the AmneziaWG app's (its key
 * whitelist) and the AmneziaVPN app's (its own chunked layout of the `vpn://` link, one code per
 * 850-byte chunk). An app that cannot take the config says why; a text too large for a readable
 * code says so instead of drawing it. The codes hold the private key: nothing is fetched or drawn
 * until asked.
 */
export function AppQrCodes({ configId, nodeId, nodeName }: { configId: string; nodeId: string; nodeName: string }) {
  const [shown, setShown] = useState(false);
  const gate = useGate("getNodeAppConfigs");
  const apps = useAppConfigs(configId, nodeId, shown && gate.can.allowed);
  return (
    <>
      <p className="muted">They hold the node&apos;s private key: show them only where no one else can scan them.</p>
      <button type="button" aria-pressed={shown} {...gate.props} disabled={gate.disabled} onClick={() => setShown(!shown)}>
        {shown ? "Hide QR codes" : "Show QR codes"}
      </button>
      {gate.reason}
      {shown && (
        <QueryView query={apps} loadingLabel="Loading the app configs…">
          {(answer) => answer.apps.map((entry) => <AppQr key={entry.app} entry={entry} nodeName={nodeName} />)}
        </QueryView>
      )}
    </>
  );
}

/** One app's heading, then its code(s) or why there is none. */
function AppQr({ entry, nodeName }: { entry: AppConfig; nodeName: string }) {
  const app = CLIENT_APPS[entry.app];
  const headingId = `qr-${entry.app}`;
  return (
    <section className="app-qr" aria-labelledby={headingId}>
      <h3 id={headingId} className="subhead">
        {app.name}
      </h3>
      {entry.text === null ? (
        <p className="muted">Not offered: {entry.refusal?.message ?? "this app cannot take this config"}.</p>
      ) : entry.app === "amneziavpn" ? (
        <QrSeries parts={amneziaVpnQrChunksOfLink(entry.text)} label={`QR code for the ${app.name}`} nodeName={nodeName} scan={app.scan} filename={entry.filename} />
      ) : (
        <QrCanvas text={entry.text} label={`QR code for the ${app.name}: ${nodeName}`} filename={entry.filename} scan={app.scan} />
      )}
    </section>
  );
}

/** The AmneziaVPN app's codes, numbered: it reassembles them in any order. */
function QrSeries({ parts, label, nodeName, scan, filename }: { parts: string[]; label: string; nodeName: string; scan: string; filename: string }) {
  return (
    <>
      <p className="muted">
        {scan} {parts.length > 1 ? `Scan all ${parts.length} codes, one after another.` : ""}
      </p>
      <div className="qr-series">
        {parts.map((part, index) => (
          <figure key={index}>
            <QrCanvas text={part} label={`${label}, part ${index + 1} of ${parts.length}: ${nodeName}`} filename={filename} />
            {parts.length > 1 && (
              <figcaption>
                Part {index + 1} of {parts.length}
              </figcaption>
            )}
          </figure>
        ))}
      </div>
    </>
  );
}

/**
 * A text as a QR code on a canvas (no inline script: CSP 'self'), under `scan` (where the app
 * scans it), or the reason it is not drawn.
 */
function QrCanvas({ text, label, filename, scan }: { text: string; label: string; filename: string; scan?: string }) {
  const ref = useRef<HTMLCanvasElement>(null);
  const [error, setError] = useState<string | null>(null);
  const tooLarge = qrVersionOf(text) > MAX_READABLE_QR_VERSION;
  useEffect(() => {
    if (ref.current === null || tooLarge) return;
    QRCode.toCanvas(ref.current, text, { errorCorrectionLevel: "L", margin: 4, width: 320 }).then(
      () => setError(null),
      (err: unknown) => setError(errorMessage(err)),
    );
  }, [text, tooLarge]);
  if (tooLarge) {
    const bytes = new TextEncoder().encode(text).length;
    return (
      <p className="qr-too-large" role="status">
        Too large for one QR code: {bytes.toLocaleString("en")} bytes, where a code a phone reads holds about {BYTES_AT_MAX_VERSION.toLocaleString("en")}. Import the file {filename}{" "}
        in the app instead (Download, above).
      </p>
    );
  }
  return (
    <>
      {scan !== undefined && <p className="muted">{scan}</p>}
      <canvas ref={ref} className="qr" role="img" aria-label={label} width={320} height={320} />
      {error !== null && (
        <p className="form-error" role="alert">
          The QR code could not be drawn: {error}
        </p>
      )}
    </>
  );
}
