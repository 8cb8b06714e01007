/**
 * The writes on alert channels and rules. Each answer goes into the cached list at once (the SSE events
 * `alert.channel.updated` and `alert.rule.updated` bring the same to other tabs); a secret an answer carries (a new or
 * rotated webhook's) stays in the mutation's result for the page to show once, never in the cache.
 */
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client.js";
import { keys } from "../../api/keys.js";
import { withChannel, withRule } from "../../api/patches.js";
import type { AlertRuleListAnswer, AlertRuleView, ChannelListAnswer, ChannelView, CreateAlertRuleBody, CreateChannelBody, UpdateAlertRuleBody, UpdateChannelBody } from "../../api/types.js";

/** Puts a channel answer (its secret left out) into the cached list. */
function useKeepChannel() {
  const queryClient = useQueryClient();
  return ({ secret: _secret, ...view }: ChannelView & { secret?: string | undefined }) =>
    queryClient.setQueryData<ChannelListAnswer>(keys.alertChannels, (old) => old && withChannel(old, view.channel_id, view));
}

/** `POST /api/v1/alerts/channels`: a webhook's answer carries its signing secret, this once. */
export function useCreateChannel() {
  const keep = useKeepChannel();
  return useMutation({ mutationFn: (body: CreateChannelBody) => api.createAlertChannel({ body }), onSuccess: keep });
}

/** `PATCH /api/v1/alerts/channels/{channel_id}`: name, settings (a secret left out is kept), enabled. */
export function useUpdateChannel() {
  const keep = useKeepChannel();
  return useMutation({
    mutationFn: ({ channel, body }: { channel: ChannelView; body: UpdateChannelBody }) => api.updateAlertChannel({ params: { channel_id: channel.channel_id }, body }),
    onSuccess: keep,
  });
}

/** `POST …/{channel_id}/rotate-secret`: the new secret, this once; the old one signs beside it for 24 h. */
export function useRotateChannelSecret() {
  const keep = useKeepChannel();
  return useMutation({ mutationFn: (channel: ChannelView) => api.rotateAlertChannelSecret({ params: { channel_id: channel.channel_id } }), onSuccess: keep });
}

/** `DELETE /api/v1/alerts/channels/{channel_id}`: the channel and its delivery log go. */
export function useDeleteChannel() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (channel: ChannelView) => api.deleteAlertChannel({ params: { channel_id: channel.channel_id } }),
    onSuccess: (_v, channel) => {
      queryClient.setQueryData<ChannelListAnswer>(keys.alertChannels, (old) => old && withChannel(old, channel.channel_id, null));
      void queryClient.invalidateQueries({ queryKey: keys.alertDeliveries });
    },
  });
}

/**
 * `POST …/{channel_id}/test`: a test alert through the real delivery path, answered after its
 * first attempt; the log shows it (and its retries) through `alert.delivery.updated`.
 */
export function useTestChannel() {
  return useMutation({ mutationFn: (channel: ChannelView) => api.testAlertChannel({ params: { channel_id: channel.channel_id } }) });
}

/** Puts a rule answer into the cached list in its place, or takes it out (`null`: deleted). */
function useKeepRule() {
  const queryClient = useQueryClient();
  return (ruleId: string, rule: AlertRuleView | null) => queryClient.setQueryData<AlertRuleListAnswer>(keys.alertRules, (old) => old && withRule(old, ruleId, rule));
}

/** `POST /api/v1/alerts/rules`. */
export function useCreateRule() {
  const keep = useKeepRule();
  return useMutation({ mutationFn: (body: CreateAlertRuleBody) => api.createAlertRule({ body }), onSuccess: (rule) => keep(rule.rule_id, rule) });
}

/** `PATCH /api/v1/alerts/rules/{rule_id}`. */
export function useUpdateRule() {
  const keep = useKeepRule();
  return useMutation({
    mutationFn: ({ rule, body }: { rule: AlertRuleView; body: UpdateAlertRuleBody }) => api.updateAlertRule({ params: { rule_id: rule.rule_id }, body }),
    onSuccess: (rule) => keep(rule.rule_id, rule),
  });
}

/** `DELETE /api/v1/alerts/rules/{rule_id}`. */
export function useDeleteRule() {
  const keep = useKeepRule();
  return useMutation({ mutationFn: (rule: AlertRuleView) => api.deleteAlertRule({ params: { rule_id: rule.rule_id } }), onSuccess: (_v, rule) => keep(rule.rule_id, null) });
}
