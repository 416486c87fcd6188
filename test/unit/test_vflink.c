/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test/unit/test_vflink.c - node/vflink: the reply parser on RTM_NEWLINK answers built here with
 * libmnl (two VFs, none, a refusal with an extack message), on every truncation, on every byte
 * of them changed and on random bytes (each input in a buffer of its exact size, so that ASan
 * sees a read past it); the MAC helpers, the range check and the "already satisfied" check; and
 * the live calls on the loopback interface and an absent one (a netlink socket, no privilege).
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/vflink.h"

static uint32_t msgbuf[4096 / 4];

/* One VF's IFLA_VF_INFO, as rtnl_fill_vfinfo() writes it. */
static void put_vf(struct nlmsghdr *nlh, uint32_t vf, uint8_t last, uint32_t vlan, uint32_t qos,
                   uint32_t spoof, uint32_t trust, uint32_t state)
{
    struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_VF_INFO);
    struct ifla_vf_mac mac = {.vf = vf, .mac = {0x02, 0, 0, 0, 0, last}};
    struct ifla_vf_broadcast brd;
    memset(brd.broadcast, 0xff, sizeof(brd.broadcast));
    struct ifla_vf_vlan v = {.vf = vf, .vlan = vlan, .qos = qos};
    struct ifla_vf_tx_rate rate = {.vf = vf};
    struct ifla_vf_spoofchk sp = {.vf = vf, .setting = spoof};
    struct ifla_vf_link_state ls = {.vf = vf, .link_state = state};
    struct ifla_vf_trust tr = {.vf = vf, .setting = trust};
    mnl_attr_put(nlh, IFLA_VF_MAC, sizeof(mac), &mac);
    mnl_attr_put(nlh, IFLA_VF_BROADCAST, sizeof(brd), &brd);
    mnl_attr_put(nlh, IFLA_VF_VLAN, sizeof(v), &v);
    mnl_attr_put(nlh, IFLA_VF_TX_RATE, sizeof(rate), &rate);
    mnl_attr_put(nlh, IFLA_VF_SPOOFCHK, sizeof(sp), &sp);
    mnl_attr_put(nlh, IFLA_VF_LINK_STATE, sizeof(ls), &ls);
    mnl_attr_put(nlh, IFLA_VF_TRUST, sizeof(tr), &tr);
    struct nlattr *stats = mnl_attr_nest_start(nlh, IFLA_VF_STATS);
    mnl_attr_put_u64(nlh, IFLA_VF_STATS_RX_PACKETS, 12);
    mnl_attr_nest_end(nlh, stats);
    mnl_attr_put_u32(nlh, 200, 7); /* an attribute from a newer kernel */
    mnl_attr_nest_end(nlh, info);
}

/* An RTM_NEWLINK for "enp0s5" with `nvfs` VFs (0 to 2; -1: without IFLA_VFINFO_LIST), then the
 * acknowledgement, at `buf`. Returns the whole length; `*link_len` is the RTM_NEWLINK's. */
static size_t build_reply(void *buf, int nvfs, size_t *link_len)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = RTM_NEWLINK;
    nlh->nlmsg_seq = 7;
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_index = 2;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, "enp0s5");
    mnl_attr_put_u32(nlh, IFLA_MTU, 1500);
    mnl_attr_put_u32(nlh, IFLA_NUM_VF, nvfs < 0 ? 0 : (uint32_t)nvfs);
    if (nvfs >= 0) {
        struct nlattr *list = mnl_attr_nest_start(nlh, IFLA_VFINFO_LIST);
        if (nvfs > 0)
            put_vf(nlh, 0, 0x10, 10, 3, 1, 0, IFLA_VF_LINK_STATE_AUTO);
        if (nvfs > 1)
            put_vf(nlh, 1, 0x11, 0, 0, 0, UINT32_MAX, IFLA_VF_LINK_STATE_DISABLE);
        mnl_attr_nest_end(nlh, list);
    }
    mnl_attr_put_strz(nlh, IFLA_QDISC, "mq");
    *link_len = nlh->nlmsg_len;
    struct nlmsghdr *ack = mnl_nlmsg_put_header((char *)buf + NLMSG_ALIGN(nlh->nlmsg_len));
    ack->nlmsg_type = NLMSG_ERROR;
    ack->nlmsg_seq = 7;
    struct nlmsgerr *e = mnl_nlmsg_put_extra_header(ack, sizeof(*e));
    e->error = 0;
    return NLMSG_ALIGN(nlh->nlmsg_len) + ack->nlmsg_len;
}

/* node_vflink_parse() of a copy of `len` bytes in a buffer of exactly that size. */
static int parse_exact(const void *buf, size_t len, struct node_vflink *vfs, size_t max, size_t *n,
                       struct err *err)
{
    void *copy = malloc(len > 0 ? len : 1);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, buf, len);
    int r = node_vflink_parse(copy, len, vfs, max, n, err);
    free(copy);
    return r;
}

static void test_two_vfs(void)
{
    size_t link_len, len = build_reply(msgbuf, 2, &link_len);
    struct node_vflink vfs[4];
    size_t n = 99;
    struct err err = {""};
    CU_ASSERT_EQUAL_FATAL(parse_exact(msgbuf, len, vfs, 4, &n, &err), 0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    static const uint8_t mac0[6] = {0x02, 0, 0, 0, 0, 0x10}, mac1[6] = {0x02, 0, 0, 0, 0, 0x11};
    CU_ASSERT_EQUAL(vfs[0].index, 0);
    CU_ASSERT_EQUAL(memcmp(vfs[0].mac, mac0, 6), 0);
    CU_ASSERT_EQUAL(vfs[0].vlan, 10);
    CU_ASSERT_EQUAL(vfs[0].qos, 3);
    CU_ASSERT_EQUAL(vfs[0].spoofchk, 1);
    CU_ASSERT_EQUAL(vfs[0].trust, 0);
    CU_ASSERT_EQUAL(vfs[0].link_state, IFLA_VF_LINK_STATE_AUTO);
    CU_ASSERT_EQUAL(vfs[1].index, 1);
    CU_ASSERT_EQUAL(memcmp(vfs[1].mac, mac1, 6), 0);
    CU_ASSERT_EQUAL(vfs[1].vlan, 0);
    CU_ASSERT_EQUAL(vfs[1].qos, 0);
    CU_ASSERT_EQUAL(vfs[1].spoofchk, 0);
    CU_ASSERT_EQUAL(vfs[1].trust, -1); /* (__u32)-1: the driver left it unset */
    CU_ASSERT_EQUAL(vfs[1].link_state, IFLA_VF_LINK_STATE_DISABLE);

    /* The RTM_NEWLINK alone (the ack in the next datagram), and in an unaligned buffer. */
    CU_ASSERT_EQUAL(parse_exact(msgbuf, link_len, vfs, 4, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 2);
    char *odd = malloc(len + 1);
    CU_ASSERT_PTR_NOT_NULL(odd);
    if (!odd)
        return;
    memcpy(odd + 1, msgbuf, len);
    n = 0;
    CU_ASSERT_EQUAL(node_vflink_parse(odd + 1, len, vfs, 4, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(vfs[0].vlan, 10);
    free(odd);

    /* Room for one VF only. */
    n = 99;
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 1, &n, &err), -E2BIG);
    CU_ASSERT_EQUAL(n, 99);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "more than 1 VFs"));
}

static void test_no_vfs(void)
{
    size_t link_len, n = 99;
    struct node_vflink vfs[1];
    struct err err = {""};
    size_t len = build_reply(msgbuf, 0, &link_len);
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 1, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 0);
    n = 99;
    len = build_reply(msgbuf, -1, &link_len);
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 0, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 0);
    /* The acknowledgement alone, and nothing at all, do not describe a link. */
    CU_ASSERT_EQUAL(parse_exact((char *)msgbuf + link_len, len - link_len, vfs, 1, &n, &err),
                    -EBADMSG);
    CU_ASSERT_STRING_EQUAL(err.msg, "malformed netlink answer: no RTM_NEWLINK");
    CU_ASSERT_EQUAL(parse_exact(msgbuf, 0, vfs, 1, &n, &err), -EBADMSG);
}

/* An NLMSG_ERROR refusing a request, with an extack message, capped or with the request. */
static size_t build_error(void *buf, int error, bool capped, const char *msg)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = NLMSG_ERROR;
    nlh->nlmsg_flags = NLM_F_ACK_TLVS | (capped ? NLM_F_CAPPED : 0);
    struct nlmsgerr *e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));
    e->error = error;
    e->msg = (struct nlmsghdr){.nlmsg_len = capped ? 16 : 16 + 24, .nlmsg_type = RTM_SETLINK};
    if (!capped)
        memset(mnl_nlmsg_put_extra_header(nlh, 24), 0x41, 24); /* the request's payload */
    mnl_attr_put_u32(nlh, NLMSGERR_ATTR_OFFS, 32);
    if (msg)
        mnl_attr_put_strz(nlh, NLMSGERR_ATTR_MSG, msg);
    return nlh->nlmsg_len;
}

static void test_kernel_error(void)
{
    struct node_vflink vfs[1];
    size_t n = 99;
    struct err err = {""};
    size_t len = build_error(msgbuf, -EINVAL, true, "VF index out of range");
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 1, &n, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "the kernel answered: VF index out of range");
    len = build_error(msgbuf, -EOPNOTSUPP, false, "not here");
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 1, &n, &err), -EOPNOTSUPP);
    CU_ASSERT_STRING_EQUAL(err.msg, "the kernel answered: not here");
    len = build_error(msgbuf, -ENODEV, true, NULL);
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 1, &n, &err), -ENODEV);
    CU_ASSERT_STRING_EQUAL(err.msg, "the kernel answered: No such device");
    CU_ASSERT_EQUAL(n, 99);
    /* An error number no kernel sends. */
    ((struct nlmsgerr *)mnl_nlmsg_get_payload((struct nlmsghdr *)msgbuf))->error = 5;
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 1, &n, &err), -EBADMSG);
    /* The extack string without its NUL: left out, the errno text is used. */
    len = build_error(msgbuf, -EINVAL, true, "x");
    ((char *)msgbuf)[len - 3] = 'y'; /* "x\0" padded to 4: the NUL at len - 3 */
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 1, &n, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "the kernel answered: Invalid argument");
    /* An uncapped error whose request header claims more than there is. */
    len = build_error(msgbuf, -EINVAL, false, "hidden");
    ((struct nlmsgerr *)mnl_nlmsg_get_payload((struct nlmsghdr *)msgbuf))->msg.nlmsg_len =
            UINT32_MAX;
    CU_ASSERT_EQUAL(parse_exact(msgbuf, len, vfs, 1, &n, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "the kernel answered: Invalid argument");
}

/* A VF whose IFLA_VF_VLAN is shorter than struct ifla_vf_vlan, or with no IFLA_VF_MAC. */
static void test_short_vf_attribute(void)
{
    struct node_vflink vfs[2];
    size_t n = 99;
    struct err err = {""};
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(msgbuf);
    nlh->nlmsg_type = RTM_NEWLINK;
    mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg));
    struct nlattr *list = mnl_attr_nest_start(nlh, IFLA_VFINFO_LIST);
    struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_VF_INFO);
    struct ifla_vf_mac mac = {.vf = 0, .mac = {2, 0, 0, 0, 0, 1}};
    mnl_attr_put(nlh, IFLA_VF_MAC, sizeof(mac), &mac);
    mnl_attr_put_u32(nlh, IFLA_VF_VLAN, 10);
    mnl_attr_nest_end(nlh, info);
    mnl_attr_nest_end(nlh, list);
    CU_ASSERT_EQUAL(parse_exact(msgbuf, nlh->nlmsg_len, vfs, 2, &n, &err), -EBADMSG);
    CU_ASSERT_STRING_EQUAL(err.msg,
                           "malformed netlink answer: a VF attribute shorter than its type");

    nlh = mnl_nlmsg_put_header(msgbuf);
    nlh->nlmsg_type = RTM_NEWLINK;
    mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg));
    list = mnl_attr_nest_start(nlh, IFLA_VFINFO_LIST);
    info = mnl_attr_nest_start(nlh, IFLA_VF_INFO);
    mnl_attr_put_u32(nlh, IFLA_VF_RATE, 0);
    mnl_attr_nest_end(nlh, info);
    mnl_attr_nest_end(nlh, list);
    CU_ASSERT_EQUAL(parse_exact(msgbuf, nlh->nlmsg_len, vfs, 2, &n, &err), -EBADMSG);
    CU_ASSERT_STRING_EQUAL(err.msg, "malformed netlink answer: a VF without IFLA_VF_MAC");
    CU_ASSERT_EQUAL(n, 99);
}

/* A parse of untrusted bytes: an answer in range, or an error the header lists. */
static void check_garbage(const void *buf, size_t len)
{
    struct node_vflink vfs[3];
    size_t n = 99;
    struct err err = {""};
    int r = parse_exact(buf, len, vfs, 3, &n, &err);
    if (r == 0) {
        CU_ASSERT(n <= 3);
        for (size_t i = 0; i < n; i++) {
            CU_ASSERT(vfs[i].index >= 0);
            CU_ASSERT(vfs[i].vlan >= 0 && vfs[i].vlan <= 4095);
            CU_ASSERT(vfs[i].qos >= 0 && vfs[i].qos <= 7);
            CU_ASSERT(vfs[i].spoofchk >= -1 && vfs[i].spoofchk <= 1);
            CU_ASSERT(vfs[i].trust >= -1 && vfs[i].trust <= 1);
            CU_ASSERT(vfs[i].link_state >= -1 && vfs[i].link_state <= 2);
        }
    } else {
        CU_ASSERT(r < 0 && r >= -4095);
        CU_ASSERT_EQUAL(n, 99);
        CU_ASSERT(err.msg[0] != '\0');
    }
}

static void test_truncated(void)
{
    size_t link_len, len = build_reply(msgbuf, 2, &link_len);
    struct node_vflink vfs[3];
    size_t n;
    struct err err = {""};
    for (size_t cut = 0; cut < len; cut++) {
        check_garbage(msgbuf, cut);
        if (cut < link_len)
            CU_ASSERT_EQUAL(parse_exact(msgbuf, cut, vfs, 3, &n, &err), -EBADMSG);
    }
    /* A message whose nlmsg_len is cut, attributes and all. */
    for (uint32_t l = 0; l < link_len; l++) {
        ((struct nlmsghdr *)msgbuf)->nlmsg_len = l;
        check_garbage(msgbuf, link_len);
    }
}

static void test_garbage(void)
{
    static const uint8_t values[] = {0x00, 0xff, 0x01, 0x7f, 0x80, 0x04, 0x10};
    size_t link_len, len = build_reply(msgbuf, 2, &link_len);
    uint8_t *orig = malloc(len);
    CU_ASSERT_PTR_NOT_NULL(orig);
    if (!orig)
        return;
    memcpy(orig, msgbuf, len);
    /* Every byte of a good answer changed to each value, and flipped bit by bit. */
    for (size_t i = 0; i < len; i++) {
        for (size_t v = 0; v < sizeof(values) + 8; v++) {
            memcpy(msgbuf, orig, len);
            uint8_t *b = (uint8_t *)msgbuf + i;
            *b = v < sizeof(values) ? values[v] : (uint8_t)(*b ^ (1u << (v - sizeof(values))));
            check_garbage(msgbuf, len);
        }
    }
    /* Random bytes, and random bytes behind a plausible header. */
    unsigned seed = 12345;
    for (int round = 0; round < 20000; round++) {
        size_t n = (size_t)(rand_r(&seed) % 300);
        uint8_t *p = (uint8_t *)msgbuf;
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)rand_r(&seed);
        if (round % 2 && n >= sizeof(struct nlmsghdr) + sizeof(struct ifinfomsg)) {
            struct nlmsghdr *nlh = (struct nlmsghdr *)msgbuf;
            nlh->nlmsg_len = (uint32_t)n;
            nlh->nlmsg_type = round % 4 == 1 ? RTM_NEWLINK : NLMSG_ERROR;
        }
        check_garbage(msgbuf, n);
    }
    free(orig);
}

static void test_mac(void)
{
    uint8_t mac[6] = {0};
    char text[NODE_VFLINK_MAC_STR];
    struct err err = {""};
    CU_ASSERT_EQUAL(node_vflink_mac_parse("02:1a:2B:3c:4D:ff", mac, &err), 0);
    static const uint8_t want[6] = {0x02, 0x1a, 0x2b, 0x3c, 0x4d, 0xff};
    CU_ASSERT_EQUAL(memcmp(mac, want, 6), 0);
    node_vflink_mac_format(mac, text);
    CU_ASSERT_STRING_EQUAL(text, "02:1a:2b:3c:4d:ff");
    static const char *const bad[] = {
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:",
            "02:00:00:00:00:0",
            "02-00-00-00-00-01",
            "0200.0000.0001",
            "02:00:00:00:00:0g",
            "2:00:00:00:00:001",
            " 02:00:00:00:00:01",
            "02:00:00:00:00:01\n",
            "02:00:00:00:00:01 ",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(mac, 0x5a, 6);
        CU_ASSERT_EQUAL(node_vflink_mac_parse(bad[i], mac, &err), -EINVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "write six pairs of hex digits"));
        CU_ASSERT_EQUAL(mac[0], 0x5a); /* untouched */
    }
    CU_ASSERT_EQUAL(node_vflink_mac_parse("01:00:5e:00:00:01", mac, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "mac 01:00:5e:00:00:01 is a multicast address (the first byte "
                                    "is odd): write a unicast one, e.g. 02:00:00:00:00:01");
    CU_ASSERT_EQUAL(node_vflink_mac_parse("FF:FF:FF:FF:FF:FF", mac, &err), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "multicast"));
    CU_ASSERT_EQUAL(node_vflink_mac_parse("00:00:00:00:00:00", mac, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg, "mac 00:00:00:00:00:00 is no address: write a unicast one, "
                                    "e.g. 02:00:00:00:00:01, or leave mac out to keep the "
                                    "driver's");
    CU_ASSERT_EQUAL(node_vflink_mac_parse("00:00:00:00:00:01", mac, &err), 0);
    node_vflink_mac_format(mac, text);
    CU_ASSERT_STRING_EQUAL(text, "00:00:00:00:00:01");
}

static struct node_vflink_want none(int index)
{
    return (struct node_vflink_want){
            .index = index, .vlan = -1, .qos = -1, .spoofchk = -1, .trust = -1};
}

static void test_want_check(void)
{
    struct err err = {""};
    struct node_vflink_want w = none(0);
    CU_ASSERT_EQUAL(node_vflink_want_check(&w, &err), 0);
    w.vlan = 4095, w.qos = 7, w.spoofchk = 1, w.trust = 0;
    CU_ASSERT_EQUAL(node_vflink_want_check(&w, &err), 0);
    w.vlan = 0, w.qos = 0;
    CU_ASSERT_EQUAL(node_vflink_want_check(&w, &err), 0);
    struct {
        struct node_vflink_want w;
        const char *msg;
    } bad[] = {
            {{.index = -1, .vlan = -1, .qos = -1, .spoofchk = -1, .trust = -1},
             "VF index -1: write 0 or more"},
            {{.vlan = 4096, .qos = -1, .spoofchk = -1, .trust = -1},
             "vlan 4096: write 0 (none) to 4095"},
            {{.vlan = 1, .qos = 8, .spoofchk = -1, .trust = -1}, "qos 8: write 0 to 7"},
            {{.vlan = -1, .qos = 2, .spoofchk = -1, .trust = -1},
             "qos 2 without a vlan: the kernel sets them together"},
            {{.vlan = 0, .qos = 2, .spoofchk = -1, .trust = -1},
             "qos 2 is a vlan priority: write a vlan from 1 to 4095"},
            {{.vlan = -1, .qos = -1, .spoofchk = 2, .trust = -1},
             "spoofchk 2: write 0 (off) or 1 (on)"},
            {{.vlan = -1, .qos = -1, .spoofchk = -1, .trust = 5},
             "trust 5: write 0 (off) or 1 (on)"},
            {{.has_mac = true,
              .mac = {3, 0, 0, 0, 0, 1},
              .vlan = -1,
              .qos = -1,
              .spoofchk = -1,
              .trust = -1},
             "mac 03:00:00:00:00:01 is a multicast address"},
            {{.has_mac = true, .vlan = -1, .qos = -1, .spoofchk = -1, .trust = -1},
             "mac 00:00:00:00:00:00 is no address"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err.msg[0] = '\0';
        CU_ASSERT_EQUAL(node_vflink_want_check(&bad[i].w, &err), -EINVAL);
        CU_ASSERT_EQUAL(strncmp(err.msg, bad[i].msg, strlen(bad[i].msg)), 0);
        /* node_vflink_set() checks first, without a socket. */
        CU_ASSERT_EQUAL(node_vflink_set("nosuch0", NULL, &bad[i].w, &err), -EINVAL);
        CU_ASSERT_EQUAL(strncmp(err.msg, bad[i].msg, strlen(bad[i].msg)), 0);
    }
}

static void test_satisfied(void)
{
    const struct node_vflink have = {.index = 1,
                                     .mac = {2, 0, 0, 0, 0, 1},
                                     .vlan = 10,
                                     .qos = 3,
                                     .spoofchk = 1,
                                     .trust = -1,
                                     .link_state = 0};
    struct node_vflink_want w = none(1);
    CU_ASSERT_TRUE(node_vflink_satisfied(&have, &w)); /* nothing asked */
    w.index = 0;
    CU_ASSERT_FALSE(node_vflink_satisfied(&have, &w)); /* another VF */
    w = none(1);
    w.has_mac = true;
    memcpy(w.mac, have.mac, 6);
    w.vlan = 10, w.qos = 3, w.spoofchk = 1;
    CU_ASSERT_TRUE(node_vflink_satisfied(&have, &w));
    w.mac[5] = 2;
    CU_ASSERT_FALSE(node_vflink_satisfied(&have, &w));
    w.mac[5] = 1, w.qos = -1; /* vlan 10 with qos left out writes qos 0 */
    CU_ASSERT_FALSE(node_vflink_satisfied(&have, &w));
    w.qos = 4;
    CU_ASSERT_FALSE(node_vflink_satisfied(&have, &w));
    w.qos = 3, w.vlan = 11;
    CU_ASSERT_FALSE(node_vflink_satisfied(&have, &w));
    w.vlan = 10, w.spoofchk = 0;
    CU_ASSERT_FALSE(node_vflink_satisfied(&have, &w));
    w.spoofchk = -1, w.trust = 0; /* the driver does not report trust: not known to be off */
    CU_ASSERT_FALSE(node_vflink_satisfied(&have, &w));
    struct node_vflink plain = have;
    plain.vlan = 0, plain.qos = 0, plain.trust = 0;
    w = none(1);
    w.vlan = 0, w.trust = 0;
    CU_ASSERT_TRUE(node_vflink_satisfied(&plain, &w));
}

/* The live calls: the loopback has no VFs; an absent interface is named; a bad name is refused
 * before any socket. */
static void test_live(void)
{
    struct node_vflink vfs[4];
    size_t n = 99;
    struct err err = {""};
    CU_ASSERT_EQUAL(node_vflink_list("lo", vfs, 4, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 0);
    n = 99;
    CU_ASSERT_EQUAL(node_vflink_list("nosuch0", vfs, 4, &n, &err), -ENODEV);
    CU_ASSERT_STRING_EQUAL(err.msg, "there is no network interface nosuch0");
    CU_ASSERT_EQUAL(n, 99);
    struct node_vflink_want w = none(0);
    w.trust = 1;
    CU_ASSERT_EQUAL(node_vflink_set("nosuch0", "igb", &w, &err), -ENODEV);
    CU_ASSERT_STRING_EQUAL(err.msg, "there is no network interface nosuch0");
    CU_ASSERT_EQUAL(node_vflink_list("", vfs, 4, &n, &err), -EINVAL);
    CU_ASSERT_EQUAL(node_vflink_list("a-name-too-long-for-linux", vfs, 4, &n, &err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err.msg,
                           "\"a-name-too-long-\" is not an interface name (1 to 15 bytes)");
    CU_ASSERT_EQUAL(node_vflink_set("a-name-too-long-for-linux", NULL, &w, &err), -EINVAL);
}

static CU_TestInfo tests[] = {
        {"two VFs", test_two_vfs},
        {"no VFs", test_no_vfs},
        {"kernel error and extack", test_kernel_error},
        {"short VF attribute", test_short_vf_attribute},
        {"truncated", test_truncated},
        {"garbage", test_garbage},
        {"mac parse and format", test_mac},
        {"want check", test_want_check},
        {"already satisfied", test_satisfied},
        {"live: lo and absent", test_live},
        CU_TEST_INFO_NULL,
};

CU_SuiteInfo vflink_suites[] = {
        {"vflink", NULL, NULL, NULL, NULL, tests},
        CU_SUITE_INFO_NULL,
};
