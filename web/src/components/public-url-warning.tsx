import { Link } from "react-router";
import { useServerSettings } from "../features/settings/queries.js";

/**
 * Shown where the console hands out a command or link meant for another host (bind command,
 * client and config download commands) while the public URL those carry is a loopback address
 * (`localhost`, 127.0.0.0/8, `::1`): such a host would reach itself, not the service. Links to
 * Settings, where the public URL is set. Renders nothing otherwise (or while the URL is unknown);
 * it disappears as soon as `settings.server.updated` says the URL changed.
 */
export function PublicUrlWarning() {
  const server = useServerSettings();
  if (server.data === undefined || !server.data.loopback) return null;
  const fromEnvironment = server.data.source === "environment";
  return (
    <p className="notice public-url-warning" role="note" aria-label="Public URL warning">
      <strong>Hosts will be told to reach {server.data.public_url}</strong>, a loopback address: another host would reach itself,
      not this service.{" "}
      {fromEnvironment ? (
        <>
          SVC_PUBLIC_URL sets it: change that variable to an address the hosts can reach and restart the service (
          <Link to="/settings#public-url">about the public URL</Link>).
        </>
      ) : (
        <>
          <Link to="/settings#public-url">Set the public URL</Link> in Settings to an address the hosts can reach.
        </>
      )}
    </p>
  );
}
