import { Background, Controls, ReactFlow, useReactFlow, useStore, type Edge, type Node, type NodeTypes } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useEffect } from "react";

/**
 * A drawing to look at, not to edit (the mesh topology, the node statechart): fitted to its
 * canvas and fitted again when the canvas changes size or the nodes change; nothing draggable,
 * selectable or focusable; zoom and fit controls. `className` sizes the canvas.
 */
export function ReadOnlyFlow({ nodes, edges, nodeTypes, className }: { nodes: Node[]; edges: Edge[]; nodeTypes?: NodeTypes; className: string }) {
  return (
    <div className={className}>
      <ReactFlow
        nodes={nodes}
        edges={edges}
        {...(nodeTypes === undefined ? {} : { nodeTypes })}
        fitView
        nodesDraggable={false}
        nodesConnectable={false}
        elementsSelectable={false}
        nodesFocusable={false}
        edgesFocusable={false}
        proOptions={{ hideAttribution: true }}
        minZoom={0.1}
      >
        <Background />
        <Controls showInteractive={false} />
        <FitOnResize />
      </ReactFlow>
    </div>
  );
}

/** Fits the drawing again whenever its canvas changes size (rotation, resize) or its node count changes. */
function FitOnResize() {
  const { fitView } = useReactFlow();
  const width = useStore((s) => s.width);
  const height = useStore((s) => s.height);
  const count = useStore((s) => s.nodeLookup.size);
  useEffect(() => {
    if (width > 0 && height > 0) void fitView();
  }, [width, height, count, fitView]);
  return null;
}
