/**
 * Migration 0020 (frozen once released, like every migration): single sign-on through an OpenID
 * provider (README "Single sign-on (OIDC)"). A person who signed in through the provider is
 * linked to one local user by the provider's issuer and the subject it names them by
 * (`user_oidc_links`; the subject is stable where usernames and e-mail addresses are not), and
 * every session records how it was opened (`admin_sessions.login`: `password` or `oidc`), so
 * that "who am I" and the audit log can tell the two apart. Sessions open at the upgrade were
 * opened with a password.
 */
import { sql, type Kysely, type Migration } from "kysely";

export const oidcLinks: Migration = {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on today's types
  async up(db: Kysely<any>): Promise<void> {
    const t = (strings: TemplateStringsArray) => sql.raw(strings.join("")).execute(db);
    await t`CREATE TABLE user_oidc_links (
      issuer TEXT NOT NULL,
      subject TEXT NOT NULL,
      user_id TEXT NOT NULL UNIQUE REFERENCES users(user_id) ON DELETE CASCADE,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (issuer, subject)
    ) STRICT`;
    await t`ALTER TABLE admin_sessions ADD COLUMN login TEXT NOT NULL DEFAULT 'password' CHECK (login IN ('password', 'oidc'))`;
  },
};
