// The parameter table (agents/common/tables/params.hpp) round trip: what the
// learner publishes as version v, an actor reads back, byte for byte, and
// only when the version moved. Public headers and libengram only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "agents/common/tables/params.hpp"
#include "engram/server.hpp"

namespace engram::agents {
namespace {

TEST(ParamsTable, ALearnersVersionIsWhatAnActorReads) {
  char dir[] = "/tmp/engram-params-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string socket = std::string(dir) + "/s.sock";
  {
    api::Server server("[arena]\nclasses = [ { block_size = 65536, count = 16 } ]\n", socket);
    api::Client learner = api::Client::connect(socket);
    api::Client actor = api::Client::connect(socket);
    const size_t n = 10000;
    learner.create_table(params_table(n));
    ParamPublisher pub(learner, n);
    ParamReader reader(actor);
    std::vector<float> got(n, -1.0f);
    EXPECT_EQ(reader.read(0, &got), 0) << "nothing published yet: the version it had";
    EXPECT_EQ(got[0], -1.0f);

    std::vector<float> v1(n), v2(n);
    for (size_t i = 0; i < n; ++i) {
      v1[i] = static_cast<float>(i) * 0.5f - 3.0f;
      v2[i] = -static_cast<float>(i) / 7.0f;
    }
    v1[17] = -0.0f;  // bytes, not values: a negative zero survives too
    pub.publish(1, v1);
    EXPECT_EQ(reader.read(0, &got), 1);
    EXPECT_EQ(std::memcmp(got.data(), v1.data(), n * sizeof(float)), 0);
    std::fill(got.begin(), got.end(), 9.0f);
    EXPECT_EQ(reader.read(1, &got), 1) << "the same version again";
    EXPECT_EQ(got[0], 9.0f) << "an unchanged version is not copied";

    pub.publish(2, v2);
    EXPECT_EQ(reader.read(1, &got), 2);
    EXPECT_EQ(std::memcmp(got.data(), v2.data(), n * sizeof(float)), 0);
    EXPECT_EQ(learner.info(kParamsTable).size, 1u) << "one item: each publish replaces the last";
  }
  (void)!std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace engram::agents
