import { useCallback } from "react";
import { useSearchParams } from "react-router";

/**
 * A page filter kept in the URL's query string (search and filters survive a reload
 * and can be shared as a link). `""` (or the default) removes the parameter. Changes replace the
 * history entry, so typing in a search box does not fill the back button.
 * @returns `[value, setValue]` like `useState`
 */
export function useUrlState(name: string, defaultValue = ""): [string, (value: string) => void] {
  const [params, setParams] = useSearchParams();
  const value = params.get(name) ?? defaultValue;
  const set = useCallback(
    (next: string) => {
      setParams(
        (prev) => {
          const out = new URLSearchParams(prev);
          if (next === "" || next === defaultValue) out.delete(name);
          else out.set(name, next);
          return out;
        },
        { replace: true },
      );
    },
    [name, defaultValue, setParams],
  );
  return [value, set];
}
