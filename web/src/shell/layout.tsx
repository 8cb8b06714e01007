import { useQuery } from "@tanstack/react-query";
import { useEffect, useRef } from "react";
import { NavLink, Outlet, useLocation } from "react-router";
import { useAuth } from "../api/auth.js";
import { api } from "../api/client.js";
import { keys } from "../api/keys.js";
import { LiveIndicator } from "../components/live-indicator.js";
import { ThemeToggle } from "../theme.js";

const NAV = [
  { to: "/", label: "Home", end: true },
  { to: "/configs", label: "Configs", end: false },
  { to: "/backups", label: "Backups", end: false },
  { to: "/settings", label: "Settings", end: false },
  { to: "/audit", label: "Audit", end: false },
];

/** "Signed in as NAME (role)": who the console acts as (`GET /api/v1/auth/me`, read again after a minute: a role change shows). */
function SignedInAs() {
  const { token } = useAuth();
  const me = useQuery({ queryKey: [...keys.me, token], queryFn: ({ signal }) => api.getMe({ signal }), staleTime: 60_000 });
  if (me.data === undefined) return null;
  return (
    <span className="signed-in" aria-label={`Signed in as ${me.data.user.username}, role ${me.data.user.role}`}>
      {me.data.user.username} <span className="muted">({me.data.user.role})</span>
    </span>
  );
}

/** The app shell: skip link, header with navigation, live indicator, theme and logout; the page below. */
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
              <li key={item.to}>
                <NavLink to={item.to} end={item.end}>
                  {item.label}
                </NavLink>
              </li>
            ))}
          </ul>
        </nav>
        <div className="topbar-tools">
          <LiveIndicator />
          <SignedInAs />
          <ThemeToggle />
          <button type="button" onClick={() => void logout()}>
            Log out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1} ref={mainRef}>
        <Outlet />
      </main>
    </div>
  );
}
