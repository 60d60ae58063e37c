// The JSON reader/writer and the small text helpers the topology format relies on.
#include <gtest/gtest.h>

#include <functional>

#include "common/error.h"
#include "threads.h"
#include "topo/json.h"
#include "topo/sysfs.h"

namespace xccl::topo {
namespace {

TEST(TopoJson, RoundTripsEveryKind) {
  Json object = Json::object();
  object.set("int", int64_t{1} << 53);
  object.set("negative", -7);
  object.set("double", 12.5);
  object.set("whole double", 450.0);
  object.set("string", "tab\there \"quoted\" \\ é");
  object.set("bool", true);
  object.set("null", Json());
  Json array = Json::array();
  array.push(1);
  array.push("two");
  array.push(Json::object());
  object.set("array", array);

  Json back = Json::parse(object.dump());
  EXPECT_EQ(back.find("int")->asInt("int"), int64_t{1} << 53);
  EXPECT_EQ(back.find("int")->kind(), Json::Kind::kInt);
  EXPECT_EQ(back.find("negative")->asInt("n"), -7);
  EXPECT_DOUBLE_EQ(back.find("double")->asDouble("d"), 12.5);
  // A whole-valued double stays a double through the text ("450.0", not "450").
  EXPECT_EQ(back.find("whole double")->kind(), Json::Kind::kDouble);
  EXPECT_EQ(back.find("string")->asString("s"), "tab\there \"quoted\" \\ é");
  EXPECT_TRUE(back.find("bool")->asBool("b"));
  EXPECT_TRUE(back.find("null")->isNull());
  ASSERT_EQ(back.find("array")->asArray("a").size(), 3u);
  EXPECT_EQ(back.find("array")->asArray("a")[1].asString("a1"), "two");
  // Members keep their insertion order.
  ASSERT_EQ(back.members().size(), 8u);
  EXPECT_EQ(back.members()[0].first, "int");
  EXPECT_EQ(back.members()[7].first, "array");
  EXPECT_EQ(back.dump(), object.dump());
}

TEST(TopoJson, KeepsShortContainersInlineAndBreaksLongOnes) {
  Json short_ = Json::parse(R"({"a": [1, 2, 3]})");
  EXPECT_EQ(short_.dump(), "{\"a\": [1, 2, 3]}\n");
  Json long_ = Json::array();
  for (int i = 0; i < 40; ++i) long_.push(1000 + i);
  std::string text = long_.dump();
  EXPECT_NE(text.find("[\n  1000,\n"), std::string::npos) << text;
}

TEST(TopoJson, DecodesEscapes) {
  Json value = Json::parse(R"(["\u00e9\ud83d\ude00\n\/"])");
  EXPECT_EQ(value.asArray("v")[0].asString("s"), "\xc3\xa9\xf0\x9f\x98\x80\n/");
}

TEST(TopoJson, RejectsMalformedText) {
  for (const char* bad :
       {"", "{", "[1,]", "{\"a\" 1}", "{\"a\": 1,}", "tru", "\"open", "{\"a\": 1} x", "[01x]",
        "{\"a\": 1, \"a\": 2}", "\"\\ud800\"", "\"bad \x01 control\"", "1e999"}) {
    EXPECT_EQ(testing::errorKindOf([&] { Json::parse(bad); }), ErrorKind::kInvalidArgument) << bad;
  }
  std::string deep(200, '[');
  EXPECT_EQ(testing::errorKindOf([&] { Json::parse(deep); }), ErrorKind::kInvalidArgument);
}

TEST(TopoJson, TypedAccessNamesTheValue) {
  Json value = Json::parse(R"({"count": "seven", "ratio": 1.5})");
  try {
    value.find("count")->asInt("count");
    FAIL() << "no throw";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("count must be an integer"), std::string::npos);
  }
  EXPECT_EQ(testing::errorKindOf([&] { value.find("ratio")->asInt("ratio"); }),
            ErrorKind::kInvalidArgument);
}

TEST(TopoCpuList, ParsesAndFormatsKernelSyntax) {
  EXPECT_EQ(parseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parseCpuList(""), std::vector<int>{});
  EXPECT_EQ(parseCpuList("5,1-2,2"), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(formatCpuList({11, 0, 1, 2, 3, 8, 10}), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_EQ(formatCpuList({4}), "4");
  for (const char* bad : {"a", "3-1", "1-", "-2", "1,,x"}) {
    EXPECT_EQ(testing::errorKindOf([&] { parseCpuList(bad); }), ErrorKind::kInvalidArgument) << bad;
  }
}

TEST(TopoPciBusId, NormalisesVendorSpellings) {
  EXPECT_EQ(normalizePciBusId("00000000:1B:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalizePciBusId("0000:1b:00.0"), "0000:1b:00.0");
  EXPECT_EQ(normalizePciBusId("1b:00.0"), "0000:1b:00.0");
  EXPECT_TRUE(isPciBusId("0000:c1:00.1"));
  EXPECT_FALSE(isPciBusId("0000:C1:00.1"));
  EXPECT_FALSE(isPciBusId("pci0000:00"));
  EXPECT_EQ(pciBusIdFromDevicePath("pci0000:00/0000:00:03.0/virtio2/net/eth0"), "0000:00:03.0");
  EXPECT_EQ(pciBusIdFromDevicePath("virtual/net/docker0"), "");
}

}  // namespace
}  // namespace xccl::topo
