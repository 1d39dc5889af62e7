// Tables: their options checked, signatures matched, handles closed with a
// dropped table, and a reset table's blocks given back in order.
#include "capi/capi_fixture.hpp"

namespace engram::test {
namespace {

TEST_F(CApi, TableOptionsAreChecked) {
  std::string long_name(64, 'x');
  EXPECT_EQ(create(long_name.c_str()), ENGRAM_E_RANGE);
  EXPECT_NE(last().find("63"), std::string::npos) << last();
  EXPECT_EQ(create("zero", 0), ENGRAM_E_RANGE);
  EXPECT_EQ(create("dup"), ENGRAM_OK);
  EXPECT_EQ(create("dup"), ENGRAM_E_EXISTS);
  cols_[1].dtype = 99;
  EXPECT_EQ(create("baddtype"), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("dtype"), std::string::npos) << last();
  cols_[1].dtype = ENGRAM_FLOAT32;
  engram_rate_limiter r;
  EXPECT_EQ(engram_rate_limiter_sample_to_insert_ratio(&r, 1.0, 1, 0.1), ENGRAM_E_INVALID);
  EXPECT_EQ(engram_rate_limiter_queue(&r, 0), ENGRAM_E_INVALID);
  // The config file refuses these for any sampler; so does the API now
  // (a uniform table took a NaN exponent, and engramctl printed it as nan).
  engram_table_options o;
  engram_table_options_init(&o);
  o.max_size = 10;
  o.columns = cols_;
  o.num_columns = 2;
  for (double e : {std::nan(""), -1.0, double(INFINITY)}) {
    o.name = "uniform_exponent";
    o.priority_exponent = e;
    EXPECT_EQ(engram_table_create(c_, &o), ENGRAM_E_INVALID) << e;
    EXPECT_NE(last().find("exponent"), std::string::npos) << last();
  }
  // Messages show doubles as %g: not DBL_MAX's 309 digits, nor -0.000000.
  o.priority_exponent = 1.0;
  o.rate_limiter.min_diff = 1e300;
  o.rate_limiter.max_diff = -1e300;
  EXPECT_EQ(engram_table_create(c_, &o), ENGRAM_E_INVALID);
  EXPECT_NE(last().find("min_diff (1e+300) must be <= max_diff (-1e+300)"), std::string::npos) << last();
}

TEST_F(CApi, SignatureMismatchesAreRefused) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_column one[1] = {cols_[0]};
  engram_writer* w = writer(one, 1);
  uint8_t obs[20] = {};
  const void* p[1] = {obs};
  ASSERT_EQ(engram_writer_append(w, p), ENGRAM_OK);
  EXPECT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_E_SIGNATURE) << "column count";
  engram_column dtype[2] = {cols_[0], cols_[1]};
  dtype[1].dtype = ENGRAM_FLOAT64;
  engram_writer* w2 = writer(dtype, 2);
  double r = 0;
  const void* p2[2] = {obs, &r};
  ASSERT_EQ(engram_writer_append(w2, p2), ENGRAM_OK);
  EXPECT_EQ(engram_writer_create_item(w2, t, 1, 1.0), ENGRAM_E_SIGNATURE) << "dtype";
  engram_column shape[2] = {cols_[0], cols_[1]};
  shape[0].shape[1] = 6;
  engram_writer* w3 = writer(shape, 2);
  uint8_t big[24] = {};
  float rf = 0;
  const void* p3[2] = {big, &rf};
  ASSERT_EQ(engram_writer_append(w3, p3), ENGRAM_OK);
  EXPECT_EQ(engram_writer_create_item(w3, t, 1, 1.0), ENGRAM_E_SIGNATURE) << "size";
  EXPECT_NE(last().find("replay"), std::string::npos);
}

TEST_F(CApi, DroppedTableClosesOpenHandles) {
  ASSERT_EQ(create("replay"), ENGRAM_OK);
  engram_table* t = open("replay");
  ASSERT_EQ(engram_table_drop(c_, "replay"), ENGRAM_OK);
  engram_sample_options so;
  engram_sample_options_init(&so);
  uint8_t obs[20];
  float r;
  void* bufs[2] = {obs, &r};
  uint32_t got;
  EXPECT_EQ(engram_sample(t, &so, bufs, nullptr, &got), ENGRAM_E_CLOSED);
  EXPECT_EQ(create("replay"), ENGRAM_OK) << "the name is free again";
}

// A table's reset frees all of its blocks at once, and the free list is a
// stack: they are listed highest first, so that the next writers take them
// in the order of memory (order_for_freeing), the order in which copies run
// fastest. Here the table's blocks went round once through evictions first.
TEST_F(CApi, AResetTablesBlocksComeBackLowestFirst) {
  ASSERT_EQ(create("replay", /*max_size=*/100), ENGRAM_OK);
  engram_table* t = open("replay");
  engram_writer* w = writer(cols_, 2);
  for (int v = 0; v < 250; ++v) {
    append(w, static_cast<uint8_t>(v));
    ASSERT_EQ(engram_writer_create_item(w, t, 1, 1.0), ENGRAM_OK) << last();
  }
  ASSERT_EQ(engram_writer_flush(w, 5000), ENGRAM_OK) << last();
  ASSERT_EQ(engram_table_reset(c_, "replay"), ENGRAM_OK) << last();

  RawClient raw(socket_, "replay");
  auto taken = raw.ctl.grant(0, 90);  // the reset's blocks are on top of the list
  ASSERT_TRUE(taken.ok()) << taken.status().message();
  ASSERT_EQ(taken->size(), 90u);
  for (size_t i = 1; i < taken->size(); ++i)
    EXPECT_LT((*taken)[i - 1].index, (*taken)[i].index) << "allocation " << i;
  EXPECT_TRUE(raw.ctl.give_back(*taken).ok());
  engram_writer_close(w);
  engram_table_close(t);
}

}  // namespace
}  // namespace engram::test
