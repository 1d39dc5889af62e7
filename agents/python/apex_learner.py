#!/usr/bin/env python3
"""An Ape-X DQN learner in PyTorch, fed by engram-apex's C++ actors (or the
Python and Rust example actors), through engram.torch.

It does what engram-apex's C++ learner does (agents/apex/learner.cpp), on
CartPole-v1: the same tables in the same layout (agents/README.md, "Ape-X
DQN"), so the actors act with its parameters unchanged; double Q-learning
with a dueling network, Huber loss, prioritized sampling (alpha 0.6) with
importance weights (beta 0.4), n-step targets (the actors' transitions carry
their n-step return and discount), a target network copied every 100
updates, parameters published every 20, new priorities sent after each
update, and a SampleToInsertRatio rate limiter (8 samples per insert)
tying learning to acting. Batches come from engram.torch's Prefetcher,
drawn while the previous one trains, and the new priorities go back
through it (its thread sends them with its next sample, so the learner
does not wake the server once per update).

    agents/python/apex_learner.py --actors 2 --out /tmp/pyapex

starts its own engram server (on OUT/engram.sock) and the C++ actors
(build/release/agents/engram-apex --role actor, or --engram-apex PATH;
--actors 0 waits for actors started by hand), prints a progress line a
second, and writes OUT/curve.csv and OUT/summary.json as engram-apex does.
It stops once the trailing-100 mean return of the envs with epsilon <= 0.01
reaches 475, or after --steps env steps.
"""
import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import deque

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
import engram  # noqa: E402
import engram.torch as et  # noqa: E402

OBS, ACTIONS, HIDDEN = 4, 2, 128  # CartPole; the C++ Torso's 128 features


class DuelingQ(torch.nn.Module):
    """engram-apex's dueling MLP (agents/common/nets/nets.cpp): its
    parameters in the same order and shapes (fc1, fc2, value, advantage;
    weight then bias), so that the flat vector published is one the C++
    actors load."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(OBS, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, HIDDEN)
        self.value = torch.nn.Linear(HIDDEN, 1)
        self.advantage = torch.nn.Linear(HIDDEN, ACTIONS)

    def forward(self, x):
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        a = self.advantage(x)
        return self.value(x) + a - a.mean(1, keepdim=True)


def flat(net):
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()]).numpy()


class Clock:
    """Seconds spent in calls: wall (waits included: for the server, for a
    rate limiter that holds the learner back, for the CPU on a busy
    machine) and this thread's CPU (what the calls cost it)."""

    def __init__(self):
        self.s = self.cpu = 0.0

    def __call__(self, f, *a, **k):
        t, c = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            self.s += time.perf_counter() - t
            self.cpu += time.thread_time() - c


def arena(capacity, actors, params):
    """The embedded server's [arena], as engram-apex's (server_config.cpp):
    episodes' blocks, the replay's chunks of 16 transitions, the
    parameters' blocks."""
    chunks = capacity // 16 + capacity // 64 + 4096 + 64 * actors
    param_block = (params * 4 + 4096 + 63) // 64 * 64
    classes = sorted([(512, 120000), (1024, chunks), (param_block, 64)])
    return "[arena]\nclasses = [" + ", ".join(f"{{ block_size = {b}, count = {c} }}" for b, c in classes) + "]\n"


def create_tables(client, a, params):
    obs = ("obs", np.float32, (OBS,))
    client.create_table("replay", [obs, ("action", np.int32, ()), ("reward", np.float32, ()),
                                   ("discount", np.float32, ()), ("next_obs", np.float32, (OBS,))],
                        max_size=a.capacity, sampler="prioritized", priority_exponent=0.6, remover="fifo",
                        rate_limiter=engram.sample_to_insert_ratio(a.samples_per_insert, a.min_replay,
                                                                   max(4.0 * a.batch, 200.0 * a.samples_per_insert)))
    client.create_table("episodes", [("env", np.int32, ()), ("epsilon", np.float32, ()), ("return", np.float32, ()),
                                     ("length", np.int32, ())], max_size=100000, sampler="fifo", max_times_sampled=1)
    client.create_table("params", [("version", np.int64, ()), ("params", np.float32, (params,))], max_size=1)


def actor_binary(a):
    """engram-apex for the actors: --engram-apex, else the tree's build,
    else the one on PATH; None if none is there to run."""
    binary = a.engram_apex or os.path.join(ROOT, "build", "release", "agents", "engram-apex")
    if not a.engram_apex and not os.path.exists(binary):
        binary = shutil.which("engram-apex") or binary
    return binary if os.path.isfile(binary) and os.access(binary, os.X_OK) else None


def start_actors(a, socket, binary):
    procs = []
    for k in range(a.actors):
        procs.append(subprocess.Popen([binary, "--env", "cartpole", "--role", "actor", "--actor-id", str(k),
                                       "--actors", str(a.actors), "--all-actors", str(a.actors), "--envs-per-actor",
                                       str(a.envs_per_actor), "--seed", str(a.seed), "--socket", socket,
                                       "--out", a.out]))
    return procs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--actors", type=int, default=2, help="C++ actor processes to start (0: actors started by hand)")
    p.add_argument("--envs-per-actor", type=int, default=8)
    p.add_argument("--steps", type=int, default=400000, help="env steps in all; training stops there")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="pyapex-out")
    p.add_argument("--socket", help="an engramd's socket (default: a server of its own on OUT/engram.sock)")
    p.add_argument("--engram-apex", help="the C++ agent whose actors to start (default: the tree's build)")
    p.add_argument("--prefetch", type=int, default=1, choices=(0, 1),
                   help="1: batches drawn in a background thread; 0: in the learner's (to measure the difference)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--capacity", type=int, default=100000)
    p.add_argument("--min-replay", type=int, default=1000)
    p.add_argument("--samples-per-insert", type=float, default=8.0)
    p.add_argument("--target-every", type=int, default=100)
    p.add_argument("--publish-every", type=int, default=20)
    p.add_argument("--solved", type=float, default=475.0)
    a = p.parse_args()
    for name in ("actors", "envs_per_actor", "steps", "batch", "capacity", "min_replay", "target_every",
                 "publish_every"):
        if getattr(a, name) < (0 if name == "actors" else 1):
            p.error(f"--{name.replace('_', '-')} must be at least {0 if name == 'actors' else 1}")
    for name in ("lr", "samples_per_insert"):
        if not math.isfinite(getattr(a, name)) or getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be a finite number above 0, not {getattr(a, name)}")
    if a.seed < 0:
        p.error(f"--seed must be at least 0, not {a.seed}")
    binary = actor_binary(a) if a.actors else None
    if a.actors and binary is None:
        where = (f"--engram-apex {a.engram_apex} is not an executable file" if a.engram_apex else
                 "no engram-apex in build/release/agents/ or on PATH")
        p.error(f"{where}: build the tree (cmake --build --preset release), pass --engram-apex PATH, or pass"
                " --actors 0 and start actors by hand")

    torch.set_num_threads(1)  # the actors need the other cores (AGENTS.md, section 4)
    torch.manual_seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    online, target = DuelingQ(), DuelingQ()
    target.load_state_dict(online.state_dict())
    opt = torch.optim.Adam(online.parameters(), lr=a.lr)
    n_params = sum(t.numel() for t in online.parameters())

    server = None
    socket = a.socket
    if not socket:
        socket = os.path.join(a.out, "engram.sock")
        server = engram.Server(socket=socket, config_toml=arena(a.capacity, a.actors, n_params))
    client = engram.connect(socket)
    for t in ("replay", "episodes", "params"):  # a previous run's, on an engramd
        try:
            client.drop_table(t)
        except engram.NotFound:
            pass
    create_tables(client, a, n_params)
    replay, episodes, params = client.table("replay"), client.table("episodes"), client.table("params")
    publisher = client.writer([("version", np.int64, ()), ("params", np.float32, (n_params,))])
    version = 0

    in_engram = Clock()  # engram's calls but the batches'
    waiting = Clock()    # the batches': drawn in the learner's thread, or waited for from the prefetcher

    def publish():
        nonlocal version
        version += 1
        publisher.append(version=version, params=flat(online))
        publisher.create_item(params, 1, 1.0)
        publisher.flush(10000)

    in_engram(publish)
    actors = start_actors(a, socket, binary)
    if a.actors == 0:
        print(f"apex_learner: --actors 0: waiting for actors on {socket}", flush=True)

    low, all_ = deque(maxlen=100), deque(maxlen=100)
    n_episodes = 0

    def drain_episodes():
        nonlocal n_episodes
        while True:
            try:
                data, _ = episodes.sample(256, timeout_ms=0)
            except (engram.Timeout, engram.RateLimited):
                return
            for eps, ret in zip(data["epsilon"][:, 0], data["return"][:, 0]):
                n_episodes += 1
                all_.append(float(ret))
                if eps <= 0.01:
                    low.append(float(ret))
            if len(data["epsilon"]) < 256:
                return

    mean = lambda d: float(np.mean(d)) if d else 0.0  # noqa: E731
    csv = open(os.path.join(a.out, "curve.csv"), "w")
    csv.write("wall_s,env_steps,updates,episodes,mean100_low_epsilon,mean100_all,resumed\n")
    print(f"apex_learner: cartpole, {a.actors} C++ actors x {a.envs_per_actor} envs, PyTorch learner batch {a.batch}"
          f"{' with the prefetcher' if a.prefetch else ''}; curve in {a.out}/curve.csv", flush=True)

    if a.prefetch:
        source = et.Prefetcher(socket, "replay", batch_size=a.batch, depth=2)
        next_batch = lambda: next(source)  # noqa: E731
    else:
        reused = et.TensorBatch(replay, a.batch)
        next_batch = lambda: et.sample(replay, a.batch, out=reused)  # noqa: E731
    t0 = time.monotonic()
    last_line = last_look = t0
    steps = updates = 0
    solved = False
    cpu0 = time.thread_time()
    try:
        while True:
            b = waiting(next_batch)
            obs, nxt = b.data["obs"][:, 0], b.data["next_obs"][:, 0]
            action = b.data["action"][:, 0].long()
            reward, discount = b.data["reward"][:, 0], b.data["discount"][:, 0]
            with torch.no_grad():  # double Q: the online net picks, the target net values
                pick = online(nxt).argmax(1, keepdim=True)
                y = reward + discount * target(nxt).gather(1, pick).squeeze(1)
            q = online(obs).gather(1, action[:, None]).squeeze(1)
            td = y - q
            loss = (b.importance_weights(0.4) * F.huber_loss(q, y, reduction="none")).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(online.parameters(), 10.0)
            opt.step()
            updates += 1
            prio = td.detach().abs() + 1e-6
            prio[~torch.isfinite(prio)] = 1.0
            if a.prefetch:  # sent by the prefetcher's thread with its next sample
                in_engram(source.update_priorities, b.keys, prio)
            else:
                in_engram(et.update_priorities_async, replay, b.keys, prio)
            if updates % a.target_every == 0:
                target.load_state_dict(online.state_dict())
            if updates % a.publish_every == 0:
                in_engram(publish)
            now = time.monotonic()
            if now - last_look >= 0.1:
                last_look = now
                in_engram(drain_episodes)
                steps = in_engram(client.table_info, "replay")["inserts"]
                solved = len(low) >= 100 and mean(low) >= a.solved
                done = solved or steps >= a.steps
                if done or now - last_line >= 1.0:
                    last_line = now
                    print(f"{now - t0:7.1f} s  steps {steps:9d}  updates {updates:7d}  episodes {n_episodes:6d}  "
                          f"mean100 {mean(low):6.1f} (eps<=0.01) {mean(all_):6.1f} (all)", flush=True)
                    csv.write(f"{now - t0:.3f},{steps},{updates},{n_episodes},{mean(low):.2f},{mean(all_):.2f},0\n")
                    csv.flush()
                if done:
                    break
    finally:
        wall = time.monotonic() - t0
        cpu = time.thread_time() - cpu0  # the learner's thread's
        # The actors' inserts first stop waiting for the learner, so that
        # each sees SIGTERM at its next step (LearnerHost::stop_actors).
        try:
            client.set_rate_limiter("replay", engram.min_size(1))
        except engram.EngramError:
            pass
        for proc in actors:
            proc.send_signal(signal.SIGTERM)
        for proc in actors:
            proc.wait(timeout=60)
        if a.prefetch:
            source.close()
        csv.close()
    frames = 0
    for k in range(a.actors):
        try:
            with open(os.path.join(a.out, f"actor-{k}.json")) as f:
                frames += json.load(f)["frames"]
        except (OSError, ValueError):
            pass
    summary = {"learner": "pytorch", "env": "cartpole", "seed": a.seed, "actors": a.actors, "solved": solved,
               "env_steps": steps, "updates": updates, "wall_s": wall, "episodes": n_episodes, "actor_frames": frames,
               "prefetch": bool(a.prefetch), "mean100_low_epsilon": mean(low), "mean100_all": mean(all_),
               "learner_engram_wall_share": (in_engram.s + waiting.s) / max(wall, 1e-9),
               "learner_calls_wall_share": in_engram.s / max(wall, 1e-9),
               "learner_batch_wall_share": waiting.s / max(wall, 1e-9), "learner_cpu_s": cpu,
               "learner_engram_cpu_share": (in_engram.cpu + waiting.cpu) / max(cpu, 1e-9)}
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f)
    torch.save(online.state_dict(), os.path.join(a.out, "model.pt"))
    print(f"apex_learner: time in engram calls: {100 * summary['learner_engram_cpu_share']:.1f}% of the learner's "
          f"CPU; {100 * summary['learner_engram_wall_share']:.1f}% of wall: "
          f"{100 * summary['learner_batch_wall_share']:.1f}% getting batches (rate limiter waits included), "
          f"{100 * summary['learner_calls_wall_share']:.1f}% in the other calls", flush=True)
    print(f"apex_learner: {'solved' if solved else 'stopped'} after {steps} env steps, {updates} updates, {wall:.1f} s; "
          f"trailing-100 mean {mean(low):.1f} (eps<=0.01)", flush=True)
    client.close()
    if server:
        server.close()


if __name__ == "__main__":
    try:
        main()
    except engram.EngramError as e:  # no server on --socket, a server gone: said, not a traceback
        sys.exit(f"apex_learner: {e}")
