#!/usr/bin/python3
"""test_deploy_k8s.py — the Kubernetes recipe (deploy/kubernetes) without a
cluster: the manifests are read as Kubernetes would (an Indexed Job of N
completions whose KLD_SHARDS is N, a merge Job reading the same N parts, both
on the PersistentVolumeClaim volume.yaml defines, mounted at /data), and the
containers' commands are run here with /bin/sh exactly as the pods would run
them — each with its JOB_COMPLETION_INDEX — on a scratch folder standing in
for the volume. The merged JSON must equal a single run's (timings aside).
Usage: test_deploy_k8s.py KLDEVAL (run from the repository root)."""
import json
import os
import shutil
import subprocess
import sys

import yaml

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what)
    failures += 0 if ok else 1


def container(job):
    spec = job["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    env = {e["name"]: e["value"] for e in c.get("env", [])}
    return spec, c, env


def load(name):
    with open(os.path.join("deploy/kubernetes", name)) as f:
        return yaml.safe_load(f)


kldeval = os.path.realpath(sys.argv[1])
shards, merge, volume = load("kl-shards.yaml"), load("kl-merge.yaml"), load("volume.yaml")
s_spec, s_c, s_env = container(shards)
m_spec, m_c, m_env = container(merge)
n = shards["spec"]["completions"]
check(shards["kind"] == "Job" and shards["spec"].get("completionMode") == "Indexed", "shards: an Indexed Job")
check(int(s_env["KLD_SHARDS"]) == n, "shards: KLD_SHARDS equals completions (%d)" % n)
check(int(m_env["KLD_SHARDS"]) == n, "merge: reads the same number of parts")
check(s_spec["restartPolicy"] == "Never" and m_spec["restartPolicy"] == "Never", "pods are not restarted in place")
claim = volume["metadata"]["name"]
for name, spec, c in (("shards", s_spec, s_c), ("merge", m_spec, m_c)):
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    check(all(vols[v]["persistentVolumeClaim"]["claimName"] == claim for v in mounts)
          and "/data" in mounts.values(), name + ": mounts the claim %s at /data" % claim)
check("ReadWriteMany" in volume["spec"]["accessModes"], "the volume is shared by every pod")

build = os.path.realpath(os.environ.get("KLD_BUILD_DIR", "build"))
root = os.path.join(build, "deploy-k8s")
shutil.rmtree(root, ignore_errors=True)
data = os.path.join(root, "data")
bindir = os.path.join(root, "bin")
os.makedirs(data)
os.makedirs(bindir)
os.symlink(kldeval, os.path.join(bindir, "kldeval"))
m = os.path.realpath("../shared/models/rand-llama")
args = "--ref %s/f16.gguf --arm %s/q4_K_M.gguf --max-docs 10 --ctx 40" % (m, m)


def pod(c, env, index=None):
    e = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"], **env)
    if index is not None:
        e["JOB_COMPLETION_INDEX"] = str(index)  # what the Indexed Job sets
    script = " ".join(c["args"]).replace("/data", data)
    return subprocess.run(c["command"] + [script], env=e, capture_output=True, text=True)


for i in range(n):
    r = pod(s_c, dict(s_env, KLD_ARGS=args), i)
    check(r.returncode == 0, "shard pod %d/%d exits 0 %s" % (i, n, r.stderr[-300:] if r.returncode else ""))
r = pod(m_c, m_env)
check(r.returncode == 0, "merge pod exits 0 %s" % (r.stderr[-300:] if r.returncode else ""))
single = os.path.join(root, "single.json")
subprocess.run([kldeval, "kl"] + args.split() + ["--quiet", "--no-db", "--json", single], check=True,
               capture_output=True)
drop = ("elapsed_s", "ref_seconds", "arm_seconds", "ref_tokens_per_s", "arm_tokens_per_s", "merged")
def strip(path):
    with open(path) as f:
        j = json.load(f)
    return {k: v for k, v in j.items() if k not in drop and k != "config"}
merged = os.path.join(data, "out", "merged.json")
check(os.path.exists(merged) and strip(merged) == strip(single), "the merged statistics equal the single run's")
# a missing part is refused: the merge pod with one partial removed
os.remove(os.path.join(data, "out", "part-%d.kldpart" % (n - 1)))
r = pod(m_c, m_env)
check(r.returncode != 0 and "part-%d.kldpart" % (n - 1) in r.stderr, "a missing part is refused by name")
print("%d failed" % failures)
sys.exit(1 if failures else 0)
