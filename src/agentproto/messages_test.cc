#include "agentproto/messages.h"

#include <gtest/gtest.h>

namespace vessel::agentproto {
namespace {

TEST(MessagesTest, ExecRoundTrip) {
  ExecMsg m;
  m.flags = ExecMsg::kPty;
  m.rows = 40;
  m.cols = 120;
  m.timeout_ms = 5000;
  m.user = "root";
  m.cwd = "/tmp";
  m.argv = {"sh", "-c", "echo hi"};
  m.env = {"A=1", ""};
  auto p = encodeMsg(m);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(validatePayload(MsgType::kExec, *p).ok());
  auto d = decodeMsg<ExecMsg>(*p);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->rows, 40);
  EXPECT_EQ(d->cols, 120);
  EXPECT_EQ(d->timeout_ms, 5000u);
  EXPECT_EQ(d->user, "root");
  EXPECT_EQ(d->argv, m.argv);
  EXPECT_EQ(d->env, m.env);
}

TEST(MessagesTest, ListEntriesRoundTrip) {
  ListEntriesMsg m;
  m.entries.push_back({"a/b", {1, 0644, 1, 2, 3, -4, ""}});
  m.entries.push_back({"l", {3, 0777, 0, 0, 0, 5, "target"}});
  auto d = decodeMsg<ListEntriesMsg>(*encodeMsg(m));
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->entries.size(), 2u);
  EXPECT_EQ(d->entries[1].stat.link_target, "target");
  EXPECT_EQ(d->entries[0].stat.mtime_ns, -4);
}

TEST(MessagesTest, ExtensionsRoundTrip) {
  WriteFileInPlaceMsg w{"/home/user/a", 0600, 1000, 1000};
  auto p = encodeMsg(w);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(validatePayload(MsgType::kWriteFileInPlace, *p).ok());
  auto d = decodeMsg<WriteFileInPlaceMsg>(*p);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->path, "/home/user/a");
  EXPECT_EQ(d->mode, 0600u);
  EXPECT_EQ(d->uid, 1000u);
  EXPECT_FALSE(decodeMsg<WriteFileInPlaceMsg>(p->substr(0, p->size() - 1)).ok());
  WatchTreeMsg t{"/srv"};
  auto tp = encodeMsg(t);
  ASSERT_TRUE(tp.ok());
  ASSERT_TRUE(validatePayload(MsgType::kWatchTree, *tp).ok());
  EXPECT_EQ(decodeMsg<WatchTreeMsg>(*tp)->path, "/srv");
  EXPECT_FALSE(encodeMsg(WatchTreeMsg{std::string(kMaxPath + 1, 'a')}).ok());
  // Tree watches name events by relative path, longer than one name.
  WatchEventMsg e{WatchEventMsg::kCreate, std::string(300, 'd') + "/f"};
  auto ep = encodeMsg(e);
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(decodeMsg<WatchEventMsg>(*ep)->name.size(), 302u);
  EXPECT_EQ(msgTypeName(MsgType::kWatchTree), "WatchTree");
  SetXattrsMsg sx{"/f", "user.e2b.", {{"k", "v"}, {"empty", ""}}};
  auto sp = encodeMsg(sx);
  ASSERT_TRUE(sp.ok());
  ASSERT_TRUE(validatePayload(MsgType::kSetXattrs, *sp).ok());
  auto sd = decodeMsg<SetXattrsMsg>(*sp);
  ASSERT_TRUE(sd.ok());
  ASSERT_EQ(sd->attrs.size(), 2u);
  EXPECT_EQ(sd->attrs[0].value, "v");
  EXPECT_EQ(sd->prefix, "user.e2b.");
  SetXattrsMsg big{"/f", "p", {}};
  big.attrs.resize(kMaxXattrs + 1);
  EXPECT_FALSE(encodeMsg(big).ok());
  EXPECT_FALSE(encodeMsg(SetXattrsMsg{"/f", "p", {{std::string(256, 'k'), ""}}}).ok());
  XattrsResultMsg r{{{"a", std::string(4096, 'x')}}};
  auto rp = encodeMsg(r);
  ASSERT_TRUE(rp.ok());
  ASSERT_TRUE(validatePayload(MsgType::kXattrsResult, *rp).ok());
  EXPECT_EQ(decodeMsg<XattrsResultMsg>(*rp)->attrs[0].value.size(), 4096u);
  EXPECT_TRUE(validatePayload(MsgType::kGetXattrs, *encodeMsg(GetXattrsMsg{"/f", "user."})).ok());
}

TEST(MessagesTest, SetNetworkRoundTripAndCaps) {
  SetNetworkMsg m{SetNetworkMsg::kUp, "eth0", "172.16.0.2/30", "172.16.0.1", "172.16.0.1"};
  auto d = decodeMsg<SetNetworkMsg>(*encodeMsg(m));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->flags, SetNetworkMsg::kUp);
  EXPECT_EQ(d->iface, "eth0");
  EXPECT_EQ(d->address, "172.16.0.2/30");
  EXPECT_EQ(d->gateway, "172.16.0.1");
  EXPECT_EQ(d->nameserver, "172.16.0.1");
  // An interface name the kernel could not hold (IFNAMSIZ 16 with its NUL).
  EXPECT_FALSE(encodeMsg(SetNetworkMsg{0, std::string(16, 'e'), "", "", ""}).ok());
  EXPECT_FALSE(encodeMsg(SetNetworkMsg{1, "eth0", std::string(19, '1'), "", ""}).ok());
  EXPECT_TRUE(validatePayload(MsgType::kSetNetwork, *encodeMsg(m)).ok());
}

TEST(MessagesTest, RejectsTrailingTruncatedAndOverCap) {
  auto p = *encodeMsg(SignalMsg{7, 9});
  EXPECT_FALSE(decodeMsg<SignalMsg>(p + "x").ok());
  EXPECT_FALSE(decodeMsg<SignalMsg>(p.substr(0, 5)).ok());
  // A string list announcing more elements than the payload could hold.
  std::string huge("\xff\xff\xff\x0f", 4);
  EXPECT_FALSE(decodeMsg<SetEnvMsg>(huge).ok());
  SetHostnameMsg h{std::string(65, 'a')};
  EXPECT_FALSE(encodeMsg(h).ok());
  std::string long_name;
  ByteWriter w;
  w.lenPrefixed32(std::string(65, 'a'));
  EXPECT_FALSE(decodeMsg<SetHostnameMsg>(w.take()).ok());
}

TEST(MessagesTest, ValidatePayloadByType) {
  EXPECT_TRUE(validatePayload(MsgType::kOk, "").ok());
  EXPECT_FALSE(validatePayload(MsgType::kOk, "x").ok());
  EXPECT_FALSE(validatePayload(static_cast<MsgType>(999), "").ok());
  EXPECT_FALSE(validatePayload(MsgType::kStdout, std::string(kDataChunk + 1, 'x')).ok());
  EXPECT_FALSE(validatePayload(MsgType::kCredit, *encodeMsg(CreditMsg{0})).ok());
  EXPECT_TRUE(validatePayload(MsgType::kCredit, *encodeMsg(CreditMsg{10})).ok());
}

TEST(MessagesTest, PortRelayMessages) {
  auto cp = encodeMsg(ConnectPortMsg{8080});
  ASSERT_TRUE(cp.ok());
  EXPECT_EQ(cp->size(), 2u);
  ASSERT_TRUE(validatePayload(MsgType::kConnectPort, *cp).ok());
  EXPECT_EQ(decodeMsg<ConnectPortMsg>(*cp)->port, 8080);
  EXPECT_FALSE(decodeMsg<ConnectPortMsg>(cp->substr(0, 1)).ok());
  EXPECT_FALSE(validatePayload(MsgType::kConnectPort, *cp + "x").ok());
  auto pc = encodeMsg(PortConnectedMsg{PortConnectedMsg::kIpv6});
  ASSERT_TRUE(validatePayload(MsgType::kPortConnected, *pc).ok());
  EXPECT_EQ(decodeMsg<PortConnectedMsg>(*pc)->family, PortConnectedMsg::kIpv6);
  // Data is raw and bounded like Stdout; a close carries nothing.
  EXPECT_TRUE(validatePayload(MsgType::kPortData, std::string(kDataChunk, 'x')).ok());
  EXPECT_FALSE(validatePayload(MsgType::kPortData, std::string(kDataChunk + 1, 'x')).ok());
  EXPECT_TRUE(validatePayload(MsgType::kPortClose, "").ok());
  EXPECT_FALSE(validatePayload(MsgType::kPortClose, "x").ok());
  EXPECT_EQ(msgTypeName(MsgType::kPortData), "PortData");
  EXPECT_TRUE(costsCredit(MsgType::kPortData));
  EXPECT_TRUE(costsCredit(MsgType::kPortClose));
}

TEST(MessagesTest, VolumeMessages) {
  MountVolumeMsg m;
  m.path = "/data";
  m.flags = MountVolumeMsg::kReadOnly;
  auto mv = encodeMsg(m);
  ASSERT_TRUE(mv.ok());
  ASSERT_TRUE(validatePayload(MsgType::kMountVolume, *mv).ok());
  auto back = decodeMsg<MountVolumeMsg>(*mv);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->path, "/data");
  EXPECT_EQ(back->flags, MountVolumeMsg::kReadOnly);
  EXPECT_FALSE(validatePayload(MsgType::kMountVolume, *mv + "x").ok());
  m.path = "data";  // relative
  EXPECT_FALSE(validatePayload(MsgType::kMountVolume, *encodeMsg(m)).ok());
  m.path = std::string(kMaxPath + 1, 'a');
  EXPECT_FALSE(encodeMsg(m).ok());
  // One whole FUSE message: a header at least, a maximal write at most.
  EXPECT_FALSE(validatePayload(MsgType::kVolumeData, std::string(15, 'x')).ok());
  EXPECT_TRUE(validatePayload(MsgType::kVolumeData, std::string(16, 'x')).ok());
  EXPECT_TRUE(validatePayload(MsgType::kVolumeData, std::string(kMaxVolumeIo + 80, 'x')).ok());
  EXPECT_FALSE(validatePayload(MsgType::kVolumeData, std::string(kMaxVolumeMessage + 1, 'x')).ok());
  EXPECT_EQ(msgTypeName(MsgType::kVolumeData), "VolumeData");
  EXPECT_TRUE(costsCredit(MsgType::kVolumeData));
}

TEST(MessagesTest, ErrorMapping) {
  ErrorMsg m = toErrorMsg(Error(Code::kNotFound, "stat /x", ENOENT));
  Error e = fromErrorMsg(*decodeMsg<ErrorMsg>(*encodeMsg(m)));
  EXPECT_EQ(e.code(), Code::kNotFound);
  EXPECT_EQ(e.sysErrno(), ENOENT);
  ErrorMsg bad{999, -5, "x"};
  EXPECT_EQ(fromErrorMsg(bad).code(), Code::kInternal);
  EXPECT_EQ(fromErrorMsg(bad).sysErrno(), 0);
}

}  // namespace
}  // namespace vessel::agentproto
