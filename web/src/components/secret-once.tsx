import type { ReactNode } from "react";
import { CopyButton } from "./copy-button.js";

/**
 * A secret the API answers once (a token, a webhook's signing secret): shown in a card with Copy
 * and "Done, I have copied it", which calls `onDone` (the caller forgets the secret). `title` heads
 * the card (its id is `id`); `children` say what the secret is for, after "Copy it now: you will
 * not see it again."; `secretLabel` names the code element, `copyLabel` the Copy button's object.
 */
export function SecretOnce({
  id,
  title,
  secret,
  secretLabel,
  copyLabel,
  onDone,
  children,
}: {
  id: string;
  title: ReactNode;
  secret: string;
  secretLabel: string;
  copyLabel: string;
  onDone: () => void;
  children: ReactNode;
}) {
  return (
    <section className="card token-secret" aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      <p className="notice" role="status">
        <strong>Copy it now: you will not see it again.</strong> {children}
      </p>
      <div className="command">
        <code className="mono break" aria-label={secretLabel}>
          {secret}
        </code>
        <CopyButton text={secret} label={copyLabel} />
      </div>
      <div className="form-actions">
        <button type="button" className="primary" onClick={onDone}>
          Done, I have copied it
        </button>
      </div>
    </section>
  );
}
