import { useRef, useState, type KeyboardEvent, type ReactNode } from "react";
import type { NodeView } from "../../api/types.js";
import { useUrlState } from "../../url-state.js";
import { NodeMachineView } from "./machine.js";

type TabId = "main" | "machine";

/**
 * The tabs of a dynamic node's page: its page as before ("Control", or "Setup"
 * before binding) and "State machine". WAI-ARIA tabs: `role=tablist/tab/tabpanel`, one tab in
 * the tab order, arrow keys (and Home/End) move and select. The chosen tab is in the URL
 * (`?tab=machine`), so a reload or a shared link keeps it. The first panel stays mounted while
 * hidden (its live control log keeps every event); the machine panel mounts when first opened.
 */
export function NodeTabs({ node, children }: { node: NodeView; children: ReactNode }) {
  const [param, setParam] = useUrlState("tab");
  const tab: TabId = param === "machine" ? "machine" : "main";
  const [machineOpened, setMachineOpened] = useState(tab === "machine");
  const refs = useRef<Record<TabId, HTMLButtonElement | null>>({ main: null, machine: null });
  const tabs: Array<{ id: TabId; label: string }> = [
    { id: "main", label: node.client.client_initialized ? "Control" : "Setup" },
    { id: "machine", label: "State machine" },
  ];
  const select = (id: TabId) => {
    if (id === "machine") setMachineOpened(true);
    setParam(id === "machine" ? "machine" : "");
  };
  const onKey = (e: KeyboardEvent<HTMLDivElement>) => {
    const i = tabs.findIndex((t) => t.id === tab);
    const next = e.key === "ArrowRight" ? (i + 1) % tabs.length : e.key === "ArrowLeft" ? (i - 1 + tabs.length) % tabs.length : e.key === "Home" ? 0 : e.key === "End" ? tabs.length - 1 : -1;
    const id = tabs[next]?.id;
    if (id === undefined) return;
    e.preventDefault();
    select(id);
    refs.current[id]?.focus();
  };
  return (
    <div className="node-tabs">
      <div role="tablist" aria-label="Node views" className="tablist" onKeyDown={onKey}>
        {tabs.map((t) => (
          <button
            key={t.id}
            ref={(el) => {
              refs.current[t.id] = el;
            }}
            type="button"
            role="tab"
            id={`node-tab-${t.id}`}
            aria-selected={tab === t.id}
            aria-controls={`node-panel-${t.id}`}
            tabIndex={tab === t.id ? 0 : -1}
            onClick={() => select(t.id)}
          >
            {t.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id="node-panel-main" aria-labelledby="node-tab-main" hidden={tab !== "main"}>
        {children}
      </div>
      <div role="tabpanel" id="node-panel-machine" aria-labelledby="node-tab-machine" hidden={tab !== "machine"}>
        {(machineOpened || tab === "machine") && <NodeMachineView configId={node.config_id} nodeId={node.node_id} />}
      </div>
    </div>
  );
}
