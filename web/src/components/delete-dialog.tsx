import type { ReactNode } from "react";
import type { UseMutationResult } from "@tanstack/react-query";
import { ConfirmDialog } from "./confirm-dialog.js";
import { FormError, type FieldLabels } from "./form-error.js";

/**
 * Confirms deleting `item` (open while it is set): the title "Delete <what> <name>?", the confirm
 * button "Delete <what>", `children` saying what goes with it. The deletion is `remove`; on
 * success, or on Cancel (which also forgets a refusal), `onClose`. The API's refusal stays in the
 * dialog, in `labels`' words.
 */
export function DeleteDialog<T>({
  item,
  what,
  nameOf,
  remove,
  onClose,
  labels,
  children,
}: {
  item: T | null;
  what: string;
  nameOf: (item: T) => string;
  remove: UseMutationResult<unknown, Error, T>;
  onClose: () => void;
  labels?: FieldLabels;
  children: ReactNode;
}) {
  const close = () => {
    onClose();
    remove.reset();
  };
  return (
    <ConfirmDialog
      open={item !== null}
      title={`Delete ${what} ${item === null ? "" : nameOf(item)}?`}
      confirmLabel={`Delete ${what}`}
      danger
      busy={remove.isPending}
      onConfirm={() => item !== null && remove.mutate(item, { onSuccess: close })}
      onCancel={close}
    >
      {children}
      <FormError error={remove.error} {...(labels === undefined ? {} : { labels })} />
    </ConfirmDialog>
  );
}
