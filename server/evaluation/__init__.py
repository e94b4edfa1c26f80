"""`synconfroute eval` and `synconfroute calibrate`: the routing study on real tasks.

- `datasets`: HumanEval single-line infilling, SAFIM, and our own JSONL task format;
- `generate`: each task's local and remote completion, once, through the server's backends;
- `sandbox`, `execute`: run the completed programs against their tests, under limits;
- `records`: the run folder (records.jsonl, exec.jsonl, run.json), append-only, resumable;
- `scoring`: replay the records through `server.routing.router` for every policy and threshold;
- `report`: Markdown tables and PNG plots; `calibrate`: choose and write the threshold;
- `run`, `cli`: the commands.

Nothing heavy is imported here: the CLI imports `cli` when it builds its parser.
"""
