import { configLatestTransitionsSchema, machineGraphSchema, nodeMachineViewSchema, nodeTimelineSchema, timelineQuerySchema } from "../../protocol/machine.schema.js";
import type { MachinesService } from "../../services/machines.service.js";
import type { App } from "../route-kit.js";
import { configParams, errorResponses, nodeParams } from "../schemas.js";

/**
 * The node statechart as data, a node's live machine state and its flight recorder
 * (admin auth, as every route not marked public). Reads only: they answer while MQTT is off too.
 */
export async function machinesRoutes(app: App, opts: { machines: MachinesService }): Promise<void> {
  const { machines } = opts;
  const tags = ["machines"];

  app.get(
    "/api/v1/machines/node",
    {
      schema: {
        operationId: "getNodeMachineGraph", "x-min-role": "viewer",
        tags,
        summary: "The node statechart: states and transitions, generated from the machine definition",
        response: { 200: machineGraphSchema, ...errorResponses() },
      },
    },
    async () => machines.graph(),
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/machine",
    {
      schema: {
        operationId: "getNodeMachine", "x-min-role": "viewer",
        tags,
        summary: "A node's active states per region and its machine context (live actor or stored snapshot)",
        params: nodeParams,
        response: { 200: nodeMachineViewSchema, ...errorResponses(404) },
      },
    },
    async (req) => machines.machine(req.params.config_id, req.params.node_id),
  );

  app.get(
    "/api/v1/configs/:config_id/nodes/:node_id/timeline",
    {
      schema: {
        operationId: "getNodeTimeline", "x-min-role": "viewer",
        tags,
        summary: "A node's flight recorder: its recorded transitions, newest first, paged by `before`",
        params: nodeParams,
        querystring: timelineQuerySchema,
        response: { 200: nodeTimelineSchema, ...errorResponses(404) },
      },
    },
    async (req) => machines.timeline(req.params.config_id, req.params.node_id, req.query.before, req.query.limit),
  );

  app.get(
    "/api/v1/configs/:config_id/timeline/latest",
    {
      schema: {
        operationId: "getLatestTransitions", "x-min-role": "viewer",
        tags,
        summary: "The newest recorded transition of each node of a config (the mesh page's last transition per node)",
        params: configParams,
        response: { 200: configLatestTransitionsSchema, ...errorResponses(404) },
      },
    },
    async (req) => machines.latestTransitions(req.params.config_id),
  );
}
