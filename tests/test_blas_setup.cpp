// blas_setup.hpp: which OpenBLAS kernels an agent asks for.
#include <gtest/gtest.h>

#include <string>

#include "agents/common/nets/blas_setup.hpp"

using engram::agents::blas_core_for;

namespace {
std::string or_keep(const char* core) { return core ? core : "keep"; }
}  // namespace

TEST(BlasSetup, AGenericFallbackIsReplacedByWhatTheCpuCanRun) {
  EXPECT_EQ(or_keep(blas_core_for("Prescott", true, true)), "SkylakeX");
  EXPECT_EQ(or_keep(blas_core_for("Prescott", false, true)), "Haswell");
  EXPECT_EQ(or_keep(blas_core_for("prescott", false, true)), "Haswell");  // however OpenBLAS spells it
  EXPECT_EQ(or_keep(blas_core_for("Core2", true, true)), "SkylakeX");
  EXPECT_EQ(or_keep(blas_core_for("Nehalem", false, true)), "Haswell");
}

TEST(BlasSetup, OpenBlasOwnChoiceIsKeptWhenItKnewTheCpu) {
  EXPECT_EQ(or_keep(blas_core_for("Haswell", true, true)), "keep");
  EXPECT_EQ(or_keep(blas_core_for("SkylakeX", true, true)), "keep");
  EXPECT_EQ(or_keep(blas_core_for("Zen", false, true)), "keep");
  EXPECT_EQ(or_keep(blas_core_for("CooperLake", true, true)), "keep");
}

TEST(BlasSetup, NothingIsForcedOnACpuWithoutAvx2OrWithoutOpenBlas) {
  EXPECT_EQ(or_keep(blas_core_for("Prescott", false, false)), "keep");
  EXPECT_EQ(or_keep(blas_core_for(nullptr, true, true)), "keep");
}
