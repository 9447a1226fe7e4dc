// Validates inputs against a JSON Schema with Ajv in strict mode, as strict
// MCP clients do: node schema.mjs < {"schema": {...}, "inputs": [...]}.
// Prints {"valid": [true|false, ...]}, or {"error": "..."} when the schema
// does not compile.
import Ajv from "ajv";

let data = "";
process.stdin.on("data", (c) => (data += c));
process.stdin.on("end", () => {
  const { schema, inputs } = JSON.parse(data);
  try {
    const validate = new Ajv({ strict: true, allErrors: true }).compile(schema);
    console.log(JSON.stringify({ valid: inputs.map((i) => validate(i)) }));
  } catch (e) {
    console.log(JSON.stringify({ error: e.message }));
  }
});
