import { useEffect, useRef } from "react";
import { NavLink, Outlet, useLocation } from "react-router";
import { useAuth } from "../api/auth.js";
import type { OperationId } from "../api/endpoints.js";
import { useCan, useMe } from "../api/roles.js";
import { LiveIndicator } from "../components/live-indicator.js";
import { ThemeToggle } from "../theme.js";

/** The main navigation; an entry with `op` shows only to a role that may call it (Users: owners; Audit, Alerts: admins). */
const NAV: ReadonlyArray<{ to: string; label: string; end: boolean; op?: OperationId }> = [
  { to: "/", label: "Home", end: true },
  { to: "/configs", label: "Configs", end: false },
  { to: "/backups", label: "Backups", end: false },
  { to: "/settings", label: "Settings", end: false },
  { to: "/audit", label: "Audit", end: false, op: "listAuditEntries" },
  { to: "/tokens", label: "Tokens", end: false },
  { to: "/users", label: "Users", end: false, op: "listUsers" },
  { to: "/alerts", label: "Alerts", end: false, op: "listAlertChannels" },
];

function NavItem({ to, label, end, op }: (typeof NAV)[number]) {
  const can = useCan(op ?? "getMe");
  if (!can.allowed) return null;
  return (
    <li>
      <NavLink to={to} end={end}>
        {label}
      </NavLink>
    </li>
  );
}

/** "Signed in as NAME (role)": who the console acts as (`GET /api/v1/auth/me`, read again after a minute: a role change shows). */
function SignedInAs() {
  const me = useMe();
  if (me.data === undefined) return null;
  return (
    <span className="signed-in">
      Signed in as <strong>{me.data.user.username}</strong> <span className="muted">({me.data.user.role})</span>
    </span>
  );
}

/** The app shell: skip link, header with navigation, live indicator, who is signed in, theme and sign-out; the page below. */
export function Layout() {
  const { logout } = useAuth();
  const location = useLocation();
  const mainRef = useRef<HTMLElement>(null);
  const firstPath = useRef(location.pathname);
  // After a navigation, focus moves to the page (as a page load would), so a keyboard or screen
  // reader user starts at its content, not on the link they left.
  useEffect(() => {
    if (location.pathname === firstPath.current) return;
    firstPath.current = "";
    mainRef.current?.focus();
  }, [location.pathname]);
  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <span className="brand">Mesh control</span>
        <nav aria-label="Main">
          <ul>
            {NAV.map((item) => (
              <NavItem key={item.to} {...item} />
            ))}
          </ul>
        </nav>
        <div className="topbar-tools">
          <LiveIndicator />
          <SignedInAs />
          <ThemeToggle />
          <button type="button" onClick={() => void logout()}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1} ref={mainRef}>
        <Outlet />
      </main>
    </div>
  );
}
