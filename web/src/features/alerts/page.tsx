import { RoleNote, useCan } from "../../api/roles.js";
import { usePageTitle } from "../../page-title.js";
import { ChannelsSection } from "./channels.js";
import { DeliveryLog } from "./deliveries.js";
import { RulesSection } from "./rules.js";
import { useAlertChannels } from "./queries.js";

/**
 * Alerts (docs/alerts.md; admins and owners: a channel holds secrets and makes the service send
 * requests to addresses of the admin's choosing, so every alert route needs the admin role):
 * the channels with a Test button, the rules that send to them, and the delivery log, live over SSE
 * (`alert.channel.updated`, `alert.delivery.updated`).
 */
export function AlertsPage() {
  usePageTitle("Alerts");
  const can = useCan("listAlertChannels");
  const channels = useAlertChannels(can.allowed);
  return (
    <section aria-labelledby="alerts-title">
      <h1 id="alerts-title">Alerts</h1>
      <p className="muted">
        Where the service sends alerts (signed webhooks, Slack, ntfy, email) and what became of each one. A delivery is retried until the receiver answers 2xx; a
        channel failing for a day is disabled, and says so here.
      </p>
      <RoleNote can={can} what="alert channels hold secrets and send to addresses an admin chooses" />
      {can.allowed && (
        <>
          <ChannelsSection query={channels} />
          <RulesSection channels={channels.data?.channels ?? []} />
          <DeliveryLog channels={channels.data?.channels ?? []} />
        </>
      )}
    </section>
  );
}
