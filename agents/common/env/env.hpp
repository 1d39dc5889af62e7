// The environments' common interface. An env writes its observation, as
// float32, into a buffer its caller owns (observation_size() floats), so
// that an actor steps many envs into one batch for inference without a
// copy. Every env draws from its own Rng, seeded explicitly: two envs with
// one seed and one sequence of actions produce the same trajectory on
// every machine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace engram::agents {

struct StepResult {
  float reward = 0;
  bool terminated = false;  // a terminal state: its value is 0, no bootstrap
  bool truncated = false;   // a time limit: the next state's value still counts
};

class Env {
 public:
  virtual ~Env() = default;
  virtual const char* name() const = 0;
  // The observation's shape (e.g. {4}, or {4, 10, 10}: channels, rows,
  // columns) and its size in floats.
  virtual std::vector<int64_t> observation_shape() const = 0;
  size_t observation_size() const {
    size_t n = 1;
    for (int64_t d : observation_shape()) n *= static_cast<size_t>(d);
    return n;
  }
  virtual int num_actions() const = 0;
  // Seeds the env's random stream, then starts an episode.
  void reset(uint64_t seed, float* obs) {
    seed_stream(seed);
    reset(obs);
  }
  // Starts an episode, drawing from the stream where it stands.
  virtual void reset(float* obs) = 0;
  // Applies `action` (0..num_actions()-1) and writes the next observation.
  // After terminated or truncated, call reset before stepping again.
  virtual StepResult step(int action, float* obs) = 0;

 protected:
  virtual void seed_stream(uint64_t seed) = 0;
};

// "cartpole" or "breakout"; nullptr for any other name.
std::unique_ptr<Env> make_env(const std::string& name);

// An env's sizes, which its networks and tables are made to.
struct EnvShape {
  std::vector<int64_t> observation;
  size_t observation_size;  // floats in one observation
  int actions;
};
// Env `name`'s (make_env's names).
EnvShape env_shape(const std::string& name);

}  // namespace engram::agents
