import { useEffect, useRef } from "react";

/**
 * A ref for the element that shows a fresh result (a download link that was just created): each
 * time `result` becomes a new value (not null or undefined) the element takes the focus, so a
 * keyboard user lands on what the button made instead of on the page's `<body>` (where the focus
 * goes while the button is disabled).
 */
export function useFocusOnArrival<T extends HTMLElement>(result: unknown) {
  const ref = useRef<T>(null);
  useEffect(() => {
    if (result !== null && result !== undefined) ref.current?.focus();
  }, [result]);
  return ref;
}
