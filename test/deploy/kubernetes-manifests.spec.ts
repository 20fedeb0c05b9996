import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { loadAll } from 'js-yaml';
import { QUEUE_BACKLOG_SQL } from '../../src/queue/queue-reads';
import { postZip, request, REST } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';
import { makeZip } from '../support/zip-fixtures';

/**
 * The manifests of deploy/kubernetes as `kubectl kustomize` renders each overlay: every object
 * valid against the Kubernetes and KEDA schemas, and what the sandbox, the probes, the sizing,
 * the labels and the NetworkPolicy promise (docs/operations.md#kubernetes).
 */
const ROOT = join(__dirname, '..', '..');
const KUBERNETES = join(ROOT, 'deploy', 'kubernetes');
const VERSION = (
  JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

type Labels = Record<string, string>;

interface Probe {
  httpGet?: { path: string; port: string | number };
}

interface Container {
  name: string;
  image: string;
  command?: string[];
  ports?: Array<{ name: string; containerPort: number }>;
  env?: Array<{ name: string; value?: string }>;
  envFrom?: unknown[];
  securityContext?: {
    privileged?: boolean;
    allowPrivilegeEscalation?: boolean;
    procMount?: string;
    capabilities?: { add?: string[] };
  };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}

interface PodSpec {
  hostUsers?: boolean;
  automountServiceAccountToken?: boolean;
  terminationGracePeriodSeconds?: number;
  securityContext: {
    runAsNonRoot?: boolean;
    seccompProfile?: unknown;
    appArmorProfile?: unknown;
  };
  containers: Container[];
  initContainers?: Container[];
}

interface EgressRule {
  to?: Array<{
    ipBlock?: { cidr: string; except?: string[] };
    namespaceSelector?: { matchLabels?: Labels };
    podSelector?: { matchLabels: Labels };
  }>;
  ports: Array<{ port: number }>;
}

/** The fields of the rendered objects the tests read (Deployment, Job, Service, policies, KEDA). */
interface Spec {
  replicas?: number;
  parallelism?: number;
  strategy?: unknown;
  template: { metadata: { labels: Labels }; spec: PodSpec };
  /** A Service's selector is the labels; a Deployment's or a budget's has matchLabels. */
  selector: Labels & { matchLabels: Labels };
  podSelector: { matchLabels: Labels };
  policyTypes: string[];
  egress: EgressRule[];
  ingress: Array<{ from?: unknown[]; ports: Array<{ port: number }> }>;
  scaleTargetRef: { name: string };
  triggers: Array<{
    type: string;
    metadata: Record<string, string>;
    authenticationRef: { name: string };
  }>;
  secretTargetRef?: unknown;
}

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Labels };
  /** Absent on a ConfigMap: read where the kind has one. */
  spec: Spec;
  data?: Record<string, string>;
}

const kubectlFound =
  spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
// In CI a missing kubectl is a failure (.ci/run installs it); elsewhere these tests skip.
const describeRendered = kubectlFound || process.env.CI ? describe : describe.skip;

function render(dir: string): K8sObject[] {
  const result = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
  if (result.error || result.status !== 0) {
    const version = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).stdout;
    throw new Error(
      `kubectl kustomize ${dir} (${version?.trim() || 'no kubectl'}): ${result.error?.message ?? result.stderr}`,
    );
  }
  return loadAll(result.stdout).filter(Boolean) as K8sObject[];
}

/** The production overlay with optional components, as an operator would include them. */
function renderProductionWith(...components: string[]): K8sObject[] {
  const dir = mkdtempSync(join(tmpdir(), 'svc-kustomize-'));
  try {
    // kustomize takes only relative paths to other kustomizations.
    const rel = relative(dir, KUBERNETES);
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      `resources:\n  - ${rel}/overlays/production\ncomponents:\n` +
        components.map((component) => `  - ${rel}/components/${component}\n`).join(''),
    );
    return render(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function renderProductionWithPgBouncer(): K8sObject[] {
  return renderProductionWith('pgbouncer');
}

/** The ports a policy's egress rules open, each rule's as one list. */
function egressPorts(policy: K8sObject): number[][] {
  return policy.spec.egress.map((rule) => rule.ports.map((p) => p.port));
}

/** The networks of svc's own cluster and node that an ipBlock to the Internet must leave out. */
const PRIVATE_NETWORKS = [
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '127.0.0.0/8',
  '169.254.0.0/16',
];

/** The model class of an object's apiVersion and kind (kubernetes-models, @kubernetes-models/keda). */
function modelOf(object: K8sObject): new (data: unknown) => { validate(): void } {
  const [group, version] = object.apiVersion.includes('/')
    ? object.apiVersion.split('/')
    : ['', object.apiVersion];
  const module =
    group === 'keda.sh'
      ? `@kubernetes-models/keda/keda.sh/${version}/${object.kind}`
      : `kubernetes-models/${group ? `${group}/` : ''}${version}/${object.kind}`;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const exported = require(module) as Record<string, new (data: unknown) => { validate(): void }>;
  return exported[object.kind];
}

/** svc's seccomp profile: its file in deploy/kubernetes/seccomp, its path under the kubelet's. */
const SECCOMP_PROFILE = 'svc-bwrap.json';

const RECOMMENDED_LABELS = [
  'app.kubernetes.io/name',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/component',
  'app.kubernetes.io/part-of',
  'app.kubernetes.io/version',
  'app.kubernetes.io/managed-by',
];

function containersOf(object: K8sObject): Container[] {
  const pod = object.spec?.template?.spec;
  return pod ? [...(pod.initContainers ?? []), ...pod.containers] : [];
}

/** Whether a selector's labels are all among `labels`. */
function selects(selector: Labels, labels: Labels): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

function roleOf(object: K8sObject): string | undefined {
  const env = containersOf(object)[0]?.env ?? [];
  return env.find((variable) => variable.name === 'ROLE')?.value;
}

function only(objects: K8sObject[], kind: string, name?: string): K8sObject {
  const found = objects.filter((o) => o.kind === kind && (!name || o.metadata.name === name));
  expect(found.map((o) => `${o.kind}/${o.metadata.name}`)).toHaveLength(1);
  return found[0];
}

const renderings: Array<[string, () => K8sObject[]]> = [
  ['embedded-demo', () => render(join(KUBERNETES, 'overlays', 'embedded-demo'))],
  ['production', () => render(join(KUBERNETES, 'overlays', 'production'))],
  ['production with PgBouncer', renderProductionWithPgBouncer],
];

describeRendered.each(renderings)('kubectl kustomize: %s', (_name, renderOverlay) => {
  let objects: K8sObject[];
  let settings: Record<string, string>;

  beforeAll(() => {
    objects = renderOverlay();
    settings = only(objects, 'ConfigMap').data ?? {};
  });

  it('renders objects that are valid against the Kubernetes and KEDA schemas', () => {
    expect(objects.length).toBeGreaterThan(2);
    for (const object of objects) {
      const Model = modelOf(object);
      expect([object.kind, typeof Model]).toEqual([object.kind, 'function']);
      expect(() => new Model(object).validate()).not.toThrow();
    }
  });

  it('labels every object and pod with the recommended labels', () => {
    for (const object of objects) {
      for (const labels of [object.metadata.labels, object.spec?.template?.metadata?.labels]) {
        if (labels === undefined && object.spec?.template === undefined) {
          continue;
        }
        const where = `${object.kind}/${object.metadata.name}`;
        expect([where, RECOMMENDED_LABELS.filter((label) => !labels?.[label])]).toEqual([
          where,
          [],
        ]);
        if (labels?.['app.kubernetes.io/name'] === 'svc') {
          expect(labels['app.kubernetes.io/version']).toBe(VERSION);
        }
      }
    }
  });

  it('gives every Deployment the three probes, requests and limits; no container privileged', () => {
    const deployments = objects.filter((o) => o.kind === 'Deployment');
    expect(deployments.length).toBeGreaterThan(0);
    for (const deployment of deployments) {
      for (const container of containersOf(deployment)) {
        const where = `${deployment.metadata.name}/${String(container.name)}`;
        for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) {
          expect([where, probe, container[probe] !== undefined]).toEqual([where, probe, true]);
        }
        for (const bound of ['requests', 'limits'] as const) {
          expect([where, bound, Object.keys(container.resources?.[bound] ?? {})]).toEqual([
            where,
            bound,
            expect.arrayContaining(['cpu', 'memory']),
          ]);
        }
      }
    }
    for (const object of objects) {
      for (const container of containersOf(object)) {
        expect(container.securityContext?.privileged).not.toBe(true);
        expect(container.securityContext?.allowPrivilegeEscalation).toBe(false);
        expect(container.securityContext?.capabilities?.add).toBeUndefined();
      }
    }
  });

  it('runs R in pods with user namespaces and the settings bubblewrap needs', () => {
    const runningR = objects.filter((o) => o.kind === 'Deployment' && roleOf(o) !== undefined);
    expect(runningR.length).toBeGreaterThan(0);
    for (const deployment of runningR) {
      const pod = deployment.spec.template.spec;
      expect(pod.hostUsers).toBe(false);
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      // svc's own profile, shipped in deploy/kubernetes/seccomp/ for the nodes' kubelet.
      expect(pod.securityContext.seccompProfile).toEqual({
        type: 'Localhost',
        localhostProfile: SECCOMP_PROFILE,
      });
      expect(pod.securityContext.appArmorProfile).toEqual({ type: 'Unconfined' });
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(containersOf(deployment)[0].securityContext?.procMount).toBe('Unmasked');
      // Running jobs may finish for SHUTDOWN_GRACE_SECONDS; then 10 s to hand back and close.
      expect(pod.terminationGracePeriodSeconds).toBe(Number(settings.SHUTDOWN_GRACE_SECONDS) + 10);
      // The node's own bound ends it first, with its log line, before the kubelet's SIGKILL.
      expect(Number(settings.SHUTDOWN_TIMEOUT_SECONDS)).toBeGreaterThan(
        Number(settings.SHUTDOWN_GRACE_SECONDS),
      );
      expect(Number(settings.SHUTDOWN_TIMEOUT_SECONDS)).toBeLessThan(
        pod.terminationGracePeriodSeconds ?? 30,
      );
    }
    expect(settings.R_SANDBOX).toBe('bwrap');
  });

  it('keeps secrets out of the ConfigMap and ROLE to each Deployment', () => {
    for (const key of ['DATABASE_URL', 'ADMIN_PASSWORD', 'USERS', 'API_KEYS', 'ROLE']) {
      expect([key, settings[key]]).toEqual([key, undefined]);
    }
  });

  it('lets API pods take requests from the ingress controller only, and reach only PostgreSQL (or PgBouncer) and DNS', () => {
    const api = only(objects, 'Deployment', 'svc-api');
    const policy = only(objects, 'NetworkPolicy', 'svc-api');
    expect(selects(policy.spec.podSelector.matchLabels, api.spec.template.metadata.labels)).toBe(
      true,
    );
    expect(policy.spec.policyTypes).toEqual(expect.arrayContaining(['Egress', 'Ingress']));
    expect(policy.spec.ingress).toEqual([
      {
        from: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } },
          },
        ],
        ports: [{ protocol: 'TCP', port: Number(settings.PORT) }],
      },
    ]);
    const database = [5432, ...(_name.includes('PgBouncer') ? [6432] : [])];
    for (const rule of policy.spec.egress) {
      expect(rule.to?.length).toBeGreaterThan(0);
      expect(JSON.stringify(rule.to)).not.toContain('ipBlock');
    }
    expect(egressPorts(policy).sort()).toEqual(
      [[53, 53], ...database.map((port) => [port])].sort(),
    );
  });

  if (_name === 'embedded-demo') {
    it('is one pod of role all on the embedded database, in a namespace of its own', () => {
      const deployment = only(objects, 'Deployment');
      expect(roleOf(deployment)).toBe('all');
      expect(deployment.spec.replicas).toBe(1);
      expect(deployment.spec.strategy).toEqual({ type: 'Recreate' });
      // Below the emptyDir (mode 0777, refused as DATA_DIR): a directory the service makes 0700.
      expect(settings.DATA_DIR).toBe('/app/data/db');
      expect(objects.map((o) => o.kind)).not.toEqual(
        expect.arrayContaining(['Job', 'ScaledObject']),
      );
      // The overlay makes its namespace, and every other object is in it.
      const namespace = only(objects, 'Namespace');
      expect(namespace.metadata.name).toBe('svc-demo');
      expect(namespace.metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe('privileged');
      for (const object of objects.filter((o) => o.kind !== 'Namespace')) {
        expect([object.kind, object.metadata.namespace]).toEqual([object.kind, 'svc-demo']);
      }
    });

    it('takes no anonymous caller: basic authentication, the credentials from a Secret the pod cannot start without', () => {
      const deployment = only(objects, 'Deployment');
      expect(settings.AUTH_MODE).toBe('basic');
      expect(containersOf(deployment)[0].envFrom).toEqual([
        { configMapRef: { name: only(objects, 'ConfigMap').metadata.name } },
        { secretRef: { name: 'svc-api-secrets' } },
      ]);
      // The Secret is made by hand (a password in the repository would be everyone's).
      expect(objects.map((o) => o.kind)).not.toContain('Secret');
    });
    return;
  }

  it('has an API Deployment with a Service and a PodDisruptionBudget, and a worker without', () => {
    const api = only(objects, 'Deployment', 'svc-api');
    const workers = objects.filter((o) => o.kind === 'Deployment' && roleOf(o) === 'worker');
    expect(roleOf(api)).toBe('api');
    expect(workers.map((worker) => worker.metadata.name)).toEqual([
      expect.stringContaining('worker'),
    ]);
    const [worker] = workers;
    const apiPods = api.spec.template.metadata.labels;
    const services = objects.filter((o) => o.kind === 'Service');
    expect(services.filter((s) => selects(s.spec.selector, apiPods))).toHaveLength(1);
    expect(
      services.filter((s) => selects(s.spec.selector, worker.spec.template.metadata.labels)),
    ).toHaveLength(0);
    const budget = only(objects, 'PodDisruptionBudget', 'svc-api');
    expect(selects(budget.spec.selector.matchLabels, apiPods)).toBe(true);
    // Workers answer their probes on the metrics port, WORKER_METRICS_PORT.
    const [container] = containersOf(worker);
    expect(container.startupProbe?.httpGet).toEqual({ path: '/metrics', port: 'metrics' });
    expect(container.ports).toEqual([
      { name: 'metrics', containerPort: Number(settings.WORKER_METRICS_PORT) },
    ]);
  });

  it('runs the migrations in a Job with the image and settings of the nodes', () => {
    const job = only(objects, 'Job', 'svc-migrate');
    const [container] = containersOf(job);
    expect(container.command).toEqual(['svc', 'migrate', 'run']);
    expect(container.image).toBe(containersOf(only(objects, 'Deployment', 'svc-api'))[0].image);
    expect(job.spec.parallelism).toBe(1);
    expect(container.envFrom).toEqual(
      expect.arrayContaining([{ secretRef: { name: 'svc-secrets' } }]),
    );
  });

  it('lets workers reach only PostgreSQL (or PgBouncer) and DNS', () => {
    const worker = only(objects, 'Deployment', 'svc-worker');
    const policy = only(objects, 'NetworkPolicy', 'svc-worker');
    expect(selects(policy.spec.podSelector.matchLabels, worker.spec.template.metadata.labels)).toBe(
      true,
    );
    expect(policy.spec.policyTypes).toEqual(expect.arrayContaining(['Egress', 'Ingress']));
    const database = [5432, ...(_name.includes('PgBouncer') ? [6432] : [])];
    const allowed: number[] = [];
    for (const rule of policy.spec.egress) {
      // A rule without `to` would open its ports to every address.
      expect(rule.to?.length).toBeGreaterThan(0);
      expect(JSON.stringify(rule.to)).not.toContain('0.0.0.0/0');
      const ports = rule.ports.map((p) => p.port);
      if (ports.includes(53)) {
        expect(ports).toEqual([53, 53]);
        expect(JSON.stringify(rule.to)).toContain('kube-dns');
      } else {
        expect(ports.every((port) => database.includes(port))).toBe(true);
      }
      allowed.push(...ports);
    }
    expect([...new Set(allowed)].sort()).toEqual([...database, 53].sort());
  });

  it('scales the workers with KEDA on the backlog query /metrics also serves', () => {
    const scaled = only(objects, 'ScaledObject', 'svc-worker');
    const worker = only(objects, 'Deployment', scaled.spec.scaleTargetRef.name);
    // The HPA owns the worker count.
    expect(worker.spec.replicas).toBeUndefined();
    const [trigger] = scaled.spec.triggers;
    expect(trigger.type).toBe('postgresql');
    expect(trigger.metadata.query).toBe(QUEUE_BACKLOG_SQL);
    expect(trigger.metadata.targetQueryValue).toBe(settings.SCRIPT_SLOTS);
    const auth = only(objects, 'TriggerAuthentication', trigger.authenticationRef.name);
    expect(auth.spec.secretTargetRef).toEqual([
      { parameter: 'connection', name: 'svc-keda', key: 'connection' },
    ]);
  });
});

describeRendered('kubectl kustomize: the optional components', () => {
  function policies(objects: K8sObject[]): { api: K8sObject; worker: K8sObject } {
    return {
      api: only(objects, 'NetworkPolicy', 'svc-api'),
      worker: only(objects, 'NetworkPolicy', 'svc-worker'),
    };
  }
  let base: { api: K8sObject; worker: K8sObject };
  beforeAll(() => {
    base = policies(renderProductionWith('pgbouncer'));
  });

  /** The egress rules a component adds to a policy (the base's removed). */
  function added(policy: K8sObject, basePolicy: K8sObject): EgressRule[] {
    const before = basePolicy.spec.egress.map((rule) => JSON.stringify(rule));
    return policy.spec.egress.filter((rule) => !before.includes(JSON.stringify(rule)));
  }

  it('tracing: sets the endpoint and opens the collector (OTLP/HTTP, 4318) to API and worker pods, nothing else', () => {
    const objects = renderProductionWith('pgbouncer', 'tracing');
    expect(only(objects, 'ConfigMap').data?.OTEL_EXPORTER_OTLP_ENDPOINT).toMatch(/^http.*:4318$/);
    const { api, worker } = policies(objects);
    for (const [policy, before] of [
      [api, base.api],
      [worker, base.worker],
    ]) {
      expect(added(policy, before)).toEqual([
        {
          to: [
            {
              namespaceSelector: {},
              podSelector: { matchLabels: { 'app.kubernetes.io/name': 'opentelemetry-collector' } },
            },
          ],
          ports: [{ protocol: 'TCP', port: 4318 }],
        },
      ]);
    }
  });

  it.each([
    // API pods poll the mailboxes; workers send the replies (mail-reply jobs).
    ['mail', [143, 993, 110, 995], [25, 465, 587]],
    ['oidc', [443], []],
  ])(
    '%s: opens public addresses on its ports to API pods (and worker pods), never the private networks',
    (component, apiPorts, workerPorts) => {
      const { api, worker } = policies(renderProductionWith('pgbouncer', component));
      for (const [policy, before, ports] of [
        [api, base.api, apiPorts],
        [worker, base.worker, workerPorts],
      ] as const) {
        const toInternet = added(policy, before).filter((rule) =>
          rule.to?.some((peer) => peer.ipBlock),
        );
        if (ports.length === 0) {
          expect(policy.spec.egress).toEqual(before.spec.egress);
          continue;
        }
        expect(toInternet).toHaveLength(1);
        const [rule] = toInternet;
        expect(rule.ports.map((p) => p.port)).toEqual(ports);
        for (const peer of rule.to ?? []) {
          expect(peer.ipBlock?.cidr).toBe('0.0.0.0/0');
          expect(peer.ipBlock?.except).toEqual(expect.arrayContaining(PRIVATE_NETWORKS));
        }
      }
    },
  );

  it('seccomp-unconfined: the fallback, Unconfined for the pods that run R only', () => {
    const objects = renderProductionWith('seccomp-unconfined');
    for (const name of ['svc-api', 'svc-worker']) {
      const pod = only(objects, 'Deployment', name).spec.template.spec;
      expect(pod.securityContext.seccompProfile).toEqual({ type: 'Unconfined' });
    }
    const job = only(objects, 'Job', 'svc-migrate').spec.template.spec;
    expect(job.securityContext.seccompProfile).toEqual({ type: 'RuntimeDefault' });
  });
});

// The demo's security settings, as the rendered ConfigMap gives them, with the Secret the
// documented command makes: the service they start, tried over HTTP by a caller without them.
describeRendered('the embedded demo over HTTP', () => {
  const ADMIN = { user: 'admin', password: 'a-password-made-by-openssl-rand' };
  let service: TestService;

  beforeAll(async () => {
    const rendered = only(render(join(KUBERNETES, 'overlays', 'embedded-demo')), 'ConfigMap');
    const security = Object.fromEntries(
      Object.entries(rendered.data ?? {}).filter(([key]) =>
        /^(AUTH_|OIDC_|GLOBAL_ADMINS$|APPLICATION_SECURITY$)/.test(key),
      ),
    );
    expect(security.AUTH_MODE).toBe('basic');
    service = await startTestService({
      ...security,
      ADMIN_USER: ADMIN.user,
      ADMIN_PASSWORD: ADMIN.password,
    });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('answers 401 to a caller without credentials, or with wrong ones, on every door that runs R or shows data', async () => {
    const zip = await makeZip([{ name: 'job.R', content: 'writeLines("x", "x.txt")\n' }]);
    const wrong = `Basic ${Buffer.from(`${ADMIN.user}:guess`).toString('base64')}`;
    for (const authorization of [undefined, wrong]) {
      const headers: Record<string, string> = authorization ? { Authorization: authorization } : {};
      const answers = [
        await postZip(service.url, zip, headers),
        await request(`${service.url}${REST}/process`, {
          method: 'POST',
          headers: {
            ...headers,
            'X-SVC-Application-Name': 'demo',
            'Content-Type': 'application/json',
          },
          body: JSON.stringify({ RFunction: 'combn', n: 5, k: 2 }),
        }),
        await request(`${service.url}${REST}/results/demo`, { headers }),
        await request(`${service.url}${REST}/admin/system/configuration`, { headers }),
      ];
      expect(answers.map((answer) => answer.status)).toEqual([401, 401, 401, 401]);
    }
  });

  it("takes the admin's credentials from the Secret", async () => {
    const answer = await postZip(
      service.url,
      await makeZip([{ name: 'job.R', content: 'writeLines("x", "x.txt")\n' }]),
      {
        Authorization: `Basic ${Buffer.from(`${ADMIN.user}:${ADMIN.password}`).toString('base64')}`,
      },
    );
    expect(answer.status).toBe(202);
  });
});

describe('deploy/kubernetes/seccomp: the profile of the pods that run R', () => {
  const profile = JSON.parse(
    readFileSync(join(KUBERNETES, 'seccomp', SECCOMP_PROFILE), 'utf8'),
  ) as {
    defaultAction: string;
    architectures?: string[];
    syscalls: Array<{ names: string[]; action: string; errnoRet?: number }>;
  };
  const refused = profile.syscalls
    .filter((rule) => rule.action !== 'SCMP_ACT_ALLOW')
    .flatMap((rule) => rule.names);

  it("allows every call bubblewrap makes its sandbox with (the runtime's default refuses them)", () => {
    expect(profile.defaultAction).toBe('SCMP_ACT_ALLOW');
    for (const call of [
      'unshare',
      'clone',
      'clone3',
      'mount',
      'umount2',
      'pivot_root',
      'setns',
      'chroot',
      'prctl',
      'seccomp',
    ]) {
      expect([call, refused.includes(call)]).toEqual([call, false]);
    }
  });

  it('refuses what no part of svc uses: kernel modules, kexec, bpf, io_uring, userfaultfd, keys, ptrace, handles', () => {
    for (const call of [
      'init_module',
      'finit_module',
      'kexec_load',
      'bpf',
      'perf_event_open',
      'io_uring_setup',
      'userfaultfd',
      'keyctl',
      'add_key',
      'ptrace',
      'process_vm_writev',
      'open_by_handle_at',
    ]) {
      expect([call, refused.includes(call)]).toEqual([call, true]);
    }
    // As absent calls (ENOSYS), so a program that probes one falls back.
    for (const rule of profile.syscalls) {
      expect(rule).toMatchObject({ action: 'SCMP_ACT_ERRNO', errnoRet: 38 });
      for (const name of rule.names) {
        expect(name).toMatch(/^[a-z_][a-z0-9_]*$/);
      }
    }
    // Only the node's own architecture: a foreign one's calls are refused by the runtime.
    expect(profile.architectures).toBeUndefined();
  });
});

describe('deploy/kubernetes settings', () => {
  it('has every setting of docs/configuration.md in settings.env or the Secrets', () => {
    const documented = [
      ...readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8').matchAll(
        /^\| `([A-Z][A-Z0-9_]+)` \|/gm,
      ),
    ].map((match) => match[1]);
    expect(documented.length).toBeGreaterThan(50);
    const keys = (file: string) =>
      [
        ...readFileSync(join(KUBERNETES, file), 'utf8').matchAll(/^(?:# )?([A-Z][A-Z0-9_]+)=/gm),
      ].map((match) => match[1]);
    const configMap = keys('base/settings.env');
    const secrets = [
      ...keys('secrets/svc-secrets.env.example'),
      ...keys('secrets/svc-api-secrets.env.example'),
    ];
    // ROLE is each Deployment's own.
    const wired = new Set([...configMap, ...secrets, 'ROLE']);
    expect(documented.filter((name) => !wired.has(name))).toEqual([]);
    expect(configMap.filter((name) => secrets.includes(name))).toEqual([]);
    for (const secret of [
      'DATABASE_URL',
      'DATABASE_LISTEN_URL',
      'ADMIN_PASSWORD',
      'USERS',
      'API_KEYS',
    ]) {
      expect([secret, secrets.includes(secret)]).toEqual([secret, true]);
    }
  });
});
