// node validate.mjs FILE... (or validateFiles() from a test): checks every manifest in each multi-document
// YAML file against the Kubernetes API schemas, as an API server would on
// `kubectl apply`, without one:
//  - the resource's OpenAPI schema (kubernetes-models: ajv validators
//    generated from Kubernetes' own OpenAPI spec): required fields, types,
//    formats (int32, quantities, int-or-string), enums;
//  - unknown fields, at every depth (the schema above allows them; the API
//    server's strict field validation does not): a field is known when the
//    Kubernetes client's model of that type (@kubernetes/client-node's
//    attribute maps, generated from the same spec) names it;
//  - what the API server checks beyond the schema and a chart gets wrong
//    most: a workload's selector matches its pod labels, port names used by
//    probes and Services exist, no two objects share a kind and name, names
//    are DNS labels or subdomains.
// Prints one line per problem and exits 1 if there is any; prints a
// summary of what it checked otherwise.
import { readFileSync, realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
// The models alone: the package's index also loads its HTTP client.
import * as k8s from "@kubernetes/client-node/dist/gen/models/all.js";
import yaml from "js-yaml";

// apiVersion "apps/v1" -> module "kubernetes-models/apps/v1/Kind";
// "v1" -> "kubernetes-models/v1/Kind".
async function modelClass(apiVersion, kind) {
  try {
    const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
    return mod[kind];
  } catch {
    return undefined;
  }
}

// The client's model name: "apps/v1" + "Deployment" -> "V1Deployment".
function clientType(apiVersion, kind) {
  const version = apiVersion.split("/").pop();
  return version.charAt(0).toUpperCase() + version.slice(1) + kind;
}

// Unknown fields: walks the object along the client's attribute maps.
function strictFields(value, type, path, where, problem) {
  if (value === null || value === undefined) return;
  let m = /^Array<(.+)>$/.exec(type);
  if (m) {
    if (Array.isArray(value)) value.forEach((v, i) => strictFields(v, m[1], `${path}[${i}]`, where, problem));
    return;
  }
  m = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (m) {
    if (typeof value === "object")
      for (const [key, v] of Object.entries(value)) strictFields(v, m[1], `${path}.${key}`, where, problem);
    return;
  }
  const cls = k8s[type];
  if (typeof cls !== "function" || typeof cls.getAttributeTypeMap !== "function") return;
  if (typeof value !== "object" || Array.isArray(value)) return;  // the schema reports types
  const attrs = cls.getAttributeTypeMap();
  for (const [key, v] of Object.entries(value)) {
    const a = attrs.find((x) => x.baseName === key);
    if (!a) {
      problem(where, `${path}.${key}: unknown field (not in ${type})`);
      continue;
    }
    strictFields(v, a.type, `${path}.${key}`, where, problem);
  }
}

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function podChecks(podTemplate, selector, where, claims, problem) {
  const labels = podTemplate?.metadata?.labels ?? {};
  for (const [k, v] of Object.entries(selector?.matchLabels ?? {}))
    if (labels[k] !== v) problem(where, `selector ${k}=${v} does not match the pod template's labels`);
  const spec = podTemplate?.spec ?? {};
  const volumes = new Set([...(spec.volumes ?? []).map((v) => v.name), ...claims]);
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    const ports = new Set((c.ports ?? []).map((p) => p.name).filter(Boolean));
    for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) {
      const port = c[probe]?.httpGet?.port ?? c[probe]?.tcpSocket?.port;
      if (typeof port === "string" && !ports.has(port))
        problem(where, `container ${c.name}: ${probe} names port "${port}", which it does not declare`);
    }
    for (const m of c.volumeMounts ?? [])
      if (!volumes.has(m.name)) problem(where, `container ${c.name}: volumeMount "${m.name}" has no volume`);
  }
  return spec;
}

// Returns {problems: ["file: Kind/name: what"], checked, kinds}.
export async function validateFiles(files) {
const problems = [];
const problem = (where, msg) => problems.push(`${where}: ${msg}`);
const seen = new Set();
const workloads = [];
const services = [];
let checked = 0;
const kinds = {};

for (const file of files) {
  let docs;
  try {
    docs = yaml.loadAll(readFileSync(file, "utf8"));
  } catch (e) {
    problem(file, `not YAML: ${e.message}`);
    continue;
  }
  for (const doc of docs) {
    if (doc === null || doc === undefined) continue;
    const where = `${file}: ${doc.kind ?? "?"}/${doc.metadata?.name ?? "?"}`;
    if (typeof doc !== "object" || !doc.apiVersion || !doc.kind) {
      problem(where, "no apiVersion or kind");
      continue;
    }
    const Model = await modelClass(doc.apiVersion, doc.kind);
    if (!Model) {
      problem(where, `${doc.apiVersion} ${doc.kind}: not a Kubernetes API resource`);
      continue;
    }
    try {
      new Model(doc).validate();
    } catch (e) {
      problem(where, e.message);
    }
    strictFields(doc, clientType(doc.apiVersion, doc.kind), doc.kind, where, problem);
    const name = doc.metadata?.name ?? "";
    const nameOk = doc.kind === "Service" ? dnsLabel.test(name) && name.length <= 63
                                          : dnsSubdomain.test(name) && name.length <= 253;
    if (!nameOk) problem(where, `metadata.name "${name}" is not a valid ${doc.kind} name`);
    const key = `${doc.apiVersion}/${doc.kind}/${doc.metadata?.namespace ?? ""}/${name}`;
    if (seen.has(key)) problem(where, "a second object of this kind and name");
    seen.add(key);
    if (["Deployment", "DaemonSet", "StatefulSet"].includes(doc.kind)) {
      // A StatefulSet's claim templates are volumes of its pods too.
      const claims = (doc.spec?.volumeClaimTemplates ?? []).map((c) => c.metadata?.name);
      const spec = podChecks(doc.spec?.template, doc.spec?.selector, where, claims, problem);
      workloads.push({ labels: doc.spec?.template?.metadata?.labels ?? {}, spec });
      if (doc.kind === "StatefulSet" && !doc.spec?.serviceName)
        problem(where, "a StatefulSet without serviceName");
    }
    if (doc.kind === "Service") services.push({ doc, where });
    kinds[doc.kind] = (kinds[doc.kind] ?? 0) + 1;
    checked++;
  }
}

// Every Service selects pods of some workload here, on ports they declare.
for (const { doc, where } of services) {
  const sel = doc.spec?.selector;
  if (!sel) continue;
  const w = workloads.find((w) => Object.entries(sel).every(([k, v]) => w.labels[k] === v));
  if (!w) {
    problem(where, "selects no pod template of these manifests");
    continue;
  }
  const ports = new Set(
    (w.spec.containers ?? []).flatMap((c) => (c.ports ?? []).map((p) => p.name)).filter(Boolean));
  for (const p of doc.spec?.ports ?? [])
    if (typeof p.targetPort === "string" && !ports.has(p.targetPort))
      problem(where, `port ${p.name}: targetPort "${p.targetPort}" is not a port of the selected pods`);
}

if (checked === 0) problem(files.join(" "), "no manifest found");
return { problems, checked, kinds };
}

export function summary({ checked, kinds }) {
  return `valid: ${checked} objects (${Object.entries(kinds).map(([k, n]) => `${n} ${k}`).join(", ")})`;
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const r = await validateFiles(process.argv.slice(2));
  for (const p of r.problems) console.log(p);
  if (r.problems.length > 0) process.exit(1);
  console.log(summary(r));
}
