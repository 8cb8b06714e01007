import { useEffect, useState } from "react";

/** `system` follows `prefers-color-scheme`; `light`/`dark` override it (kept in localStorage). */
export type ThemeChoice = "system" | "light" | "dark";
const KEY = "svc.theme";
const NEXT: Record<ThemeChoice, ThemeChoice> = { system: "light", light: "dark", dark: "system" };
const LABEL: Record<ThemeChoice, string> = { system: "Auto", light: "Light", dark: "Dark" };
const ICON: Record<ThemeChoice, string> = { system: "◐", light: "☀", dark: "☾" };

function stored(): ThemeChoice {
  try {
    const v = localStorage.getItem(KEY);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system";
  }
}

/** Applies the choice as `data-theme` on `<html>` (absent for `system`; CSS follows the media query). */
function apply(choice: ThemeChoice): void {
  if (choice === "system") delete document.documentElement.dataset["theme"];
  else document.documentElement.dataset["theme"] = choice;
}

apply(stored());

/** A button cycling system (Auto) → light → dark; its visible text, also its name, says the current choice. */
export function ThemeToggle() {
  const [choice, setChoice] = useState<ThemeChoice>(stored);
  useEffect(() => {
    apply(choice);
    try {
      if (choice === "system") localStorage.removeItem(KEY);
      else localStorage.setItem(KEY, choice);
    } catch {
      // storage refused: the choice lasts for this page
    }
  }, [choice]);
  return (
    <button type="button" className="theme-toggle" title="Change the theme: Auto (as the system) → Light → Dark" onClick={() => setChoice(NEXT[choice])}>
      <span aria-hidden="true">{ICON[choice]} </span>
      Theme: {LABEL[choice]}
    </button>
  );
}
