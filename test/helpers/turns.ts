/**
 * How many event-loop turns (`setImmediate` callbacks) ran while `work` ran: a work that yields
 * between its steps lets many through, one that holds the loop lets few.
 */
export async function turnsDuring(work: () => Promise<void>): Promise<number> {
  let turns = 0;
  let running = true;
  const tick = () => {
    turns++;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  await work();
  running = false;
  return turns;
}
