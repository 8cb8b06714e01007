import type { z } from "zod";
import type { Clock } from "../lib/clock.js";
import { isLoopbackUrl } from "../lib/loopback.js";
import { AppError } from "../errors.js";
import type { EventHub } from "../events/hub.js";
import type { Logger } from "../logger.js";
import { publicUrlProblem } from "../protocol/fields.js";
import type { serverSettingsViewSchema } from "../protocol/views.schema.js";
import type { Store } from "../store/db.js";
import { deleteSetting, getSetting, putSetting } from "../store/settings.repository.js";

/**
 * The public URL hosts are told to reach the service at (spec `{base_url}`): bind commands
 * (`svcctl bind --server …`), bind profiles' `server_url` (spec §2.6), client download commands
 * and download URLs handed out (DESIGN §5 `GET, PUT /api/v1/settings/server`).
 *
 * Precedence: SVC_PUBLIC_URL, when set, always wins (the deployment decides; a write here is
 * refused with SETTING_FROM_ENVIRONMENT rather than stored without effect); else the URL stored
 * in `settings_kv` under {@link PUBLIC_URL_KEY}; else the default `http://localhost:{port}`.
 * Every user reads {@link PublicUrlService.current} when it hands something out, so a change
 * applies from the next bind command or download on; agents already bound keep their profile.
 */

/** The `settings_kv` key holding the public URL set in Settings (its origin, no trailing slash). */
export const PUBLIC_URL_KEY = "public_url";

/** The settings answer and the `settings.server.updated` payload's `server`. */
export type ServerSettingsView = z.output<typeof serverSettingsViewSchema>;

export interface PublicUrlDeps {
  store: Store;
  clock: Clock;
  hub: EventHub;
  log: Logger;
  /** The environment's URL (`Settings.publicUrl`) and whether SVC_PUBLIC_URL set it. */
  environmentUrl: string;
  environmentSource: "environment" | "default";
}

export class PublicUrlService {
  readonly #d: PublicUrlDeps;
  #stored: string | null;

  private constructor(deps: PublicUrlDeps, stored: string | null) {
    this.#d = deps;
    this.#stored = stored;
  }

  /**
   * Reads the stored URL. One that no longer passes validation is logged and ignored (the
   * environment's or default applies) rather than stopping the service.
   */
  static async load(deps: PublicUrlDeps): Promise<PublicUrlService> {
    const raw = await getSetting(deps.store.db, PUBLIC_URL_KEY);
    let stored: string | null = null;
    if (raw !== undefined) {
      if (publicUrlProblem(raw) === undefined) stored = new URL(raw).origin;
      else deps.log.warn({ key: PUBLIC_URL_KEY }, "the stored public URL is invalid; using the default");
    }
    return new PublicUrlService(deps, stored);
  }

  /** The public URL hosts are told now: scheme, host and port, no trailing slash. */
  current(): string {
    if (this.#d.environmentSource === "environment") return this.#d.environmentUrl;
    return this.#stored ?? this.#d.environmentUrl;
  }

  /** The settings answer. */
  view(): ServerSettingsView {
    const source = this.#d.environmentSource === "environment" ? "environment" : this.#stored === null ? "default" : "stored";
    const url = this.current();
    return {
      public_url: url,
      source,
      loopback: isLoopbackUrl(url),
      stored_public_url: this.#stored,
    };
  }

  /**
   * Stores a public URL (its origin: a trailing slash is dropped), or removes it with `null`
   * (back to the default), then, after the write, publishes `settings.server.updated {server}`.
   * @param publicUrl an http(s) URL without path, query or fragment (checked by the route's
   *   schema, `publicUrlSchema` of src/protocol/fields.ts, and again here), or null
   * @throws AppError SETTING_FROM_ENVIRONMENT while SVC_PUBLIC_URL is set; VALIDATION_FAILED for
   *   a URL the schema would refuse
   */
  async update(publicUrl: string | null): Promise<ServerSettingsView> {
    if (this.#d.environmentSource === "environment") {
      throw new AppError(
        "SETTING_FROM_ENVIRONMENT",
        `the public URL is set by SVC_PUBLIC_URL (${this.#d.environmentUrl}); change or unset that variable and restart the service to change it`,
      );
    }
    let next: string | null = null;
    if (publicUrl !== null) {
      const problem = publicUrlProblem(publicUrl.trim());
      if (problem !== undefined) throw new AppError("VALIDATION_FAILED", `public_url ${problem}`);
      next = new URL(publicUrl.trim()).origin;
    }
    if (next === null) await deleteSetting(this.#d.store.db, PUBLIC_URL_KEY);
    else await putSetting(this.#d.store.db, PUBLIC_URL_KEY, next, this.#d.clock.now());
    this.#stored = next;
    const view = this.view();
    this.#d.hub.publish("settings.server.updated", { server: view });
    return view;
  }
}

/**
 * What `npm start` tells the person at the terminal about the public URL: the URL hosts are
 * given and where it comes from, and, when it is loopback, that other hosts cannot use it and
 * where to set it. Lines without trailing newlines.
 */
export function publicUrlNotice(view: ServerSettingsView): string[] {
  const from = {
    environment: "from SVC_PUBLIC_URL",
    stored: "set in the console's Settings",
    default: "the default; set it in the console's Settings or with SVC_PUBLIC_URL",
  }[view.source];
  const lines = [`Hosts are told to reach this service at ${view.public_url} (${from}).`];
  if (view.loopback) {
    lines.push(
      `Warning: ${view.public_url} is a loopback address: another host told it (bind commands, download commands) reaches itself, not this service.`,
      view.source === "environment"
        ? "Set SVC_PUBLIC_URL to an address the hosts can reach, e.g. https://mesh.example.com."
        : "Set the public URL in Settings (or SVC_PUBLIC_URL) to an address the hosts can reach, e.g. https://mesh.example.com.",
    );
  }
  return lines;
}
