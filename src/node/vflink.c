/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/vflink.c - per-VF settings over rtnetlink with libmnl: see vflink.h.
 *
 * One request, then datagrams read until the kernel's NLMSG_ERROR for its sequence number (the
 * acknowledgement, error 0, or the refusal): an RTM_GETLINK's RTM_NEWLINK comes before it. Each
 * datagram's size is asked first (MSG_PEEK | MSG_TRUNC) so that a PF with many VFs is read
 * whole, up to REPLY_MAX.
 */
#include "node/vflink.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <limits.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "base/cleanup.h"

/* The largest datagram read: a PF with 256 VFs and their statistics answers in about 100 KiB. */
#define REPLY_MAX (1u << 20)
/* A request: headers, the name and one VF setting (ifla_vf_mac, the largest, is 36 bytes). */
#define REQUEST_SIZE 256

/* What the answers to one request told. */
struct reply {
    struct node_vflink *vfs; /* room for `max` (NULL for a set) */
    size_t max, n;
    bool link;     /* an RTM_NEWLINK was read */
    bool acked;    /* the NLMSG_ERROR for the request was read */
    int error;     /* its -errno (0: an acknowledgement) */
    char why[256]; /* what was malformed, or the kernel's extack message */
};

__attribute__((format(printf, 3, 4))) static int bad(struct reply *r, int k, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): clang-analyzer 14 false positive
    (void)vsnprintf(r->why, sizeof(r->why), fmt, ap);
    va_end(ap);
    return k;
}

/* The least payload each VF attribute read here must have. */
static const uint16_t vf_attr_min[IFLA_VF_MAX + 1] = {
        [IFLA_VF_MAC] = sizeof(struct ifla_vf_mac),
        [IFLA_VF_VLAN] = sizeof(struct ifla_vf_vlan),
        [IFLA_VF_SPOOFCHK] = sizeof(struct ifla_vf_spoofchk),
        [IFLA_VF_LINK_STATE] = sizeof(struct ifla_vf_link_state),
        [IFLA_VF_TRUST] = sizeof(struct ifla_vf_trust),
};

static int vf_attr_cb(const struct nlattr *a, void *data)
{
    const struct nlattr **tb = data;
    uint16_t type = mnl_attr_get_type(a);
    if (type > IFLA_VF_MAX || vf_attr_min[type] == 0)
        return MNL_CB_OK; /* not read: rates, statistics, newer attributes */
    if (mnl_attr_get_payload_len(a) < vf_attr_min[type])
        return MNL_CB_ERROR;
    tb[type] = a;
    return MNL_CB_OK;
}

/* A setting the kernel reports as a __u32: 0, 1, or (__u32)-1 when the driver left it unset. */
static int flag(uint32_t setting)
{
    return setting <= 1 ? (int)setting : -1;
}

/* Copies an attribute's payload (its length checked by vf_attr_cb) into a struct: the payload
 * of a message in an unaligned buffer is unaligned too. */
#define PAYLOAD(tb, type, var) memcpy(&(var), mnl_attr_get_payload((tb)[type]), sizeof(var))

/* One IFLA_VF_INFO into `vf`. */
static int parse_vf(const struct nlattr *info, struct node_vflink *vf, struct reply *r)
{
    const struct nlattr *tb[IFLA_VF_MAX + 1] = {0};
    if (mnl_attr_parse_nested(info, vf_attr_cb, tb) != MNL_CB_OK)
        return bad(r, -EBADMSG, "a VF attribute shorter than its type");
    if (!tb[IFLA_VF_MAC])
        return bad(r, -EBADMSG, "a VF without IFLA_VF_MAC");
    struct ifla_vf_mac mac;
    PAYLOAD(tb, IFLA_VF_MAC, mac);
    if (mac.vf > INT_MAX)
        return bad(r, -EBADMSG, "a VF index out of range (%u)", mac.vf);
    *vf = (struct node_vflink){.index = (int)mac.vf, .spoofchk = -1, .trust = -1, .link_state = -1};
    memcpy(vf->mac, mac.mac, sizeof(vf->mac));
    if (tb[IFLA_VF_VLAN]) {
        struct ifla_vf_vlan v;
        PAYLOAD(tb, IFLA_VF_VLAN, v);
        if (v.vlan > 4095 || v.qos > 7)
            return bad(r, -EBADMSG, "VF %u: vlan %u qos %u out of range", mac.vf, v.vlan, v.qos);
        vf->vlan = (int)v.vlan;
        vf->qos = (int)v.qos;
    }
    struct ifla_vf_spoofchk spoof;
    struct ifla_vf_trust trust;
    struct ifla_vf_link_state state;
    if (tb[IFLA_VF_SPOOFCHK])
        vf->spoofchk = flag((PAYLOAD(tb, IFLA_VF_SPOOFCHK, spoof), spoof.setting));
    if (tb[IFLA_VF_TRUST])
        vf->trust = flag((PAYLOAD(tb, IFLA_VF_TRUST, trust), trust.setting));
    if (tb[IFLA_VF_LINK_STATE]) {
        PAYLOAD(tb, IFLA_VF_LINK_STATE, state);
        vf->link_state =
                state.link_state <= IFLA_VF_LINK_STATE_DISABLE ? (int)state.link_state : -1;
    }
    return 0;
}

static int link_attr_cb(const struct nlattr *a, void *data)
{
    if (mnl_attr_get_type(a) != IFLA_VFINFO_LIST)
        return MNL_CB_OK;
    if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
        return MNL_CB_ERROR;
    *(const struct nlattr **)data = a;
    return MNL_CB_OK;
}

/* An RTM_NEWLINK: its IFLA_VFINFO_LIST's VFs go to r->vfs. */
static int parse_link(const struct nlmsghdr *nlh, struct reply *r)
{
    if (mnl_nlmsg_get_payload_len(nlh) < sizeof(struct ifinfomsg))
        return bad(r, -EBADMSG, "an RTM_NEWLINK shorter than its header");
    const struct nlattr *list = NULL;
    if (mnl_attr_parse(nlh, sizeof(struct ifinfomsg), link_attr_cb, &list) != MNL_CB_OK)
        return bad(r, -EBADMSG, "a malformed IFLA_VFINFO_LIST");
    r->link = true;
    if (!list)
        return 0;
    const struct nlattr *info;
    mnl_attr_for_each_nested(info, list)
    {
        if (mnl_attr_get_type(info) != IFLA_VF_INFO)
            continue;
        if (r->n == r->max)
            return bad(r, -E2BIG, "more than %zu VFs", r->max);
        int k = parse_vf(info, &r->vfs[r->n], r);
        if (k < 0)
            return k;
        r->n++;
    }
    return 0;
}

static int extack_cb(const struct nlattr *a, void *data)
{
    if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
        *(const char **)data = mnl_attr_get_str(a);
    return MNL_CB_OK;
}

/* An NLMSG_ERROR: the error, and its extack message into r->why. */
static int parse_error(const struct nlmsghdr *nlh, struct reply *r)
{
    const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
    size_t len = mnl_nlmsg_get_payload_len(nlh);
    if (len < sizeof(*e))
        return bad(r, -EBADMSG, "an NLMSG_ERROR shorter than its header");
    if (e->error > 0 || e->error < -4095)
        return bad(r, -EBADMSG, "an NLMSG_ERROR with error %d", e->error);
    r->acked = true;
    r->error = e->error;
    r->why[0] = '\0';
    if (!e->error || !(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
        return 0;
    /* The attributes follow the request's header, and its payload unless NLM_F_CAPPED. */
    size_t off = sizeof(*e);
    if (!(nlh->nlmsg_flags & NLM_F_CAPPED) && e->msg.nlmsg_len >= sizeof(struct nlmsghdr))
        off += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
    const char *msg = NULL;
    if (MNL_ALIGN(off) <= len)
        (void)mnl_attr_parse(nlh, (unsigned)off, extack_cb, &msg);
    if (msg)
        (void)snprintf(r->why, sizeof(r->why), "%s", msg);
    return 0;
}

/* The netlink messages in `len` bytes at `buf` (4-byte aligned); messages with another sequence
 * number than `seq` (0: any) are not ours. Each message's length, padded to 4 bytes, must fit
 * in what is left: libmnl's mnl_nlmsg_ok() reads a length of 2 GiB or more as negative, and its
 * attribute walks run to the padded end. */
static int feed(struct reply *r, const void *buf, size_t len, uint32_t seq)
{
    if (len > REPLY_MAX)
        return bad(r, -EBADMSG, "an answer of %zu bytes", len);
    size_t left = len;
    const struct nlmsghdr *nlh = buf;
    while (left >= sizeof(*nlh)) {
        size_t size = MNL_ALIGN((size_t)nlh->nlmsg_len);
        if (nlh->nlmsg_len < sizeof(*nlh) || size > left)
            return bad(r, -EBADMSG, "a netlink message of %u bytes in %zu", nlh->nlmsg_len, left);
        bool ours = !seq || nlh->nlmsg_seq == seq;
        int k = 0;
        if (ours && nlh->nlmsg_type == RTM_NEWLINK)
            k = parse_link(nlh, r);
        else if (ours && nlh->nlmsg_type == NLMSG_ERROR)
            k = parse_error(nlh, r);
        if (k < 0)
            return k;
        left -= size;
        nlh = (const struct nlmsghdr *)((const char *)nlh + size);
    }
    if (left > 0)
        return bad(r, -EBADMSG, "%zu bytes that are not a whole netlink message", left);
    return 0;
}

/* The kernel's words for an error: its extack message, else the errno text. */
static const char *kernel_says(const struct reply *r)
{
    return r->why[0] ? r->why : strerror(-r->error);
}

int node_vflink_parse(const void *buf, size_t len, struct node_vflink *ret, size_t max,
                      size_t *ret_n, struct err *ret_err)
{
    struct reply r = {.vfs = ret, .max = max};
    void *copy = NULL; /* an aligned copy of an unaligned buffer */
    if ((uintptr_t)buf % 4 && len <= REPLY_MAX) {
        copy = malloc(len > 0 ? len : 1);
        if (!copy)
            return err_set(ret_err, -ENOMEM, "out of memory");
        memcpy(copy, buf, len);
    }
    int k = feed(&r, copy ? copy : buf, len, 0);
    free(copy);
    if (k < 0)
        return err_set(ret_err, k, "malformed netlink answer: %s", r.why);
    if (r.acked && r.error)
        return err_set(ret_err, r.error, "the kernel answered: %s", kernel_says(&r));
    if (!r.link)
        return err_set(ret_err, -EBADMSG, "malformed netlink answer: no RTM_NEWLINK");
    *ret_n = r.n;
    return 0;
}

static void nl_closep(struct mnl_socket **nl)
{
    if (*nl)
        mnl_socket_close(*nl);
}

/* A NETLINK_ROUTE socket with timeouts and extended acks. */
static int nl_open(struct mnl_socket **ret)
{
    _cleanup_(nl_closep) struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!nl)
        return -errno;
    const struct timeval tv = {.tv_sec = NODE_VFLINK_TIMEOUT_S};
    int fd = mnl_socket_get_fd(nl);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
        return -errno;
    /* Kernels before 4.12 have no extended acks: their refusals carry the errno alone. */
    const int one = 1;
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
    *ret = TAKE_PTR(nl);
    return 0;
}

/* Reads datagrams into `r` until the request `seq`'s NLMSG_ERROR. */
static int receive(int fd, struct reply *r, uint32_t seq)
{
    while (!r->acked) {
        ssize_t size = recv(fd, NULL, 0, MSG_PEEK | MSG_TRUNC);
        if (size < 0 && errno == EINTR)
            continue;
        if (size < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
        if ((size_t)size > REPLY_MAX)
            return bad(r, -EBADMSG, "an answer of %zd bytes", size);
        _cleanup_free_ void *buf = malloc(size > 0 ? (size_t)size : 1);
        if (!buf)
            return -ENOMEM;
        ssize_t got = recv(fd, buf, (size_t)size, 0);
        if (got < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
        int k = feed(r, buf, (size_t)got, seq);
        if (k < 0)
            return k;
    }
    return 0;
}

/* Sends `req` and reads its answers into `r`. Fails only when there is no answer to read (a
 * kernel's refusal is r->error). */
static int transact(const struct nlmsghdr *req, struct reply *r, struct err *ret_err)
{
    _cleanup_(nl_closep) struct mnl_socket *nl = NULL;
    int k = nl_open(&nl);
    if (k < 0)
        return err_set(ret_err, k, "cannot open a netlink socket: %s", strerror(-k));
    if (mnl_socket_sendto(nl, req, req->nlmsg_len) < 0) {
        k = errno == EAGAIN ? -ETIMEDOUT : -errno;
        return err_set(ret_err, k, "cannot send to netlink: %s", strerror(-k));
    }
    k = receive(mnl_socket_get_fd(nl), r, req->nlmsg_seq);
    if (k == -ETIMEDOUT)
        return err_set(ret_err, k, "netlink did not answer in %d s", NODE_VFLINK_TIMEOUT_S);
    if (k == -EBADMSG || k == -E2BIG)
        return err_set(ret_err, k, "malformed netlink answer: %s", r->why);
    if (k < 0)
        return err_set(ret_err, k, "cannot read netlink's answer: %s", strerror(-k));
    return 0;
}

static int check_ifname(const char *ifname, struct err *ret_err)
{
    size_t len = ifname ? strnlen(ifname, IFNAMSIZ) : 0;
    if (len == 0 || len >= IFNAMSIZ)
        return err_set(ret_err, -EINVAL, "\"%.*s\" is not an interface name (1 to %d bytes)",
                       IFNAMSIZ, ifname ? ifname : "", IFNAMSIZ - 1);
    return 0;
}

/* An RTM_GETLINK or RTM_SETLINK request for `ifname` in `buf` (REQUEST_SIZE, aligned). */
static struct nlmsghdr *link_request(void *buf, uint16_t type, const char *ifname)
{
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = (uint32_t)time(NULL) | 1; /* never 0, which feed() reads as "any" */
    struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
    ifm->ifi_family = AF_UNSPEC;
    mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
    return nlh;
}

int node_vflink_list(const char *ifname, struct node_vflink *ret, size_t max, size_t *ret_n,
                     struct err *ret_err)
{
    int k = check_ifname(ifname, ret_err);
    if (k < 0)
        return k;
    uint32_t buf[REQUEST_SIZE / 4];
    struct nlmsghdr *nlh = link_request(buf, RTM_GETLINK, ifname);
    mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS);
    struct reply r = {.vfs = ret, .max = max};
    k = transact(nlh, &r, ret_err);
    if (k == -E2BIG)
        return err_set(ret_err, k, "%s has more than %zu VFs", ifname, max);
    if (k < 0)
        return k;
    if (r.error == -ENODEV)
        return err_set(ret_err, r.error, "there is no network interface %s", ifname);
    if (r.error)
        return err_set(ret_err, r.error, "cannot read the VFs of %s: %s", ifname, kernel_says(&r));
    if (!r.link)
        return err_set(ret_err, -EBADMSG, "netlink acknowledged without describing %s", ifname);
    *ret_n = r.n;
    return 0;
}

/* One setting for one VF: an IFLA_VF_* attribute and how messages name it. */
struct setting {
    uint16_t type;
    const void *data;
    uint16_t len;
    const char *name; /* "trust" */
    char what[48];    /* "trust on" */
};

/* The refusal in `r` as a sentence. */
static int refused(const char *ifname, const char *driver, int index, const struct setting *s,
                   const struct reply *r, struct err *ret_err)
{
    char who[96];
    if (driver && driver[0])
        (void)snprintf(who, sizeof(who), "the %s driver of %s", driver, ifname);
    else
        (void)snprintf(who, sizeof(who), "the driver of %s", ifname);
    if (r->error == -ENODEV)
        return err_set(ret_err, r->error, "there is no network interface %s", ifname);
    if (r->error == -EOPNOTSUPP)
        return err_set(ret_err, r->error, "%s does not support %s on a VF%s%s", who, s->name,
                       r->why[0] ? ": " : "", r->why);
    return err_set(ret_err, r->error, "%s refused %s on VF %d: %s", who, s->what, index,
                   kernel_says(r));
}

static int set_one(const char *ifname, const char *driver, int index, const struct setting *s,
                   struct err *ret_err)
{
    uint32_t buf[REQUEST_SIZE / 4];
    struct nlmsghdr *nlh = link_request(buf, RTM_SETLINK, ifname);
    struct nlattr *list = mnl_attr_nest_start(nlh, IFLA_VFINFO_LIST);
    struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_VF_INFO);
    mnl_attr_put(nlh, s->type, s->len, s->data);
    mnl_attr_nest_end(nlh, info);
    mnl_attr_nest_end(nlh, list);
    struct reply r = {0};
    int k = transact(nlh, &r, ret_err);
    if (k < 0)
        return k;
    return r.error ? refused(ifname, driver, index, s, &r, ret_err) : 0;
}

static int set_flag(const char *ifname, const char *driver, int index, uint16_t type,
                    const char *name, int on, struct err *ret_err)
{
    /* ifla_vf_spoofchk and ifla_vf_trust are both {vf, setting}. */
    const struct ifla_vf_trust v = {.vf = (uint32_t)index, .setting = (uint32_t)on};
    struct setting s = {.type = type, .data = &v, .len = sizeof(v), .name = name};
    (void)snprintf(s.what, sizeof(s.what), "%s %s", name, on ? "on" : "off");
    return set_one(ifname, driver, index, &s, ret_err);
}

int node_vflink_set(const char *ifname, const char *driver, const struct node_vflink_want *w,
                    struct err *ret_err)
{
    int k = check_ifname(ifname, ret_err);
    if (k < 0 || (k = node_vflink_want_check(w, ret_err)) < 0)
        return k;
    const uint32_t vf = (uint32_t)w->index;
    if (w->has_mac) {
        struct ifla_vf_mac m = {.vf = vf};
        memcpy(m.mac, w->mac, sizeof(w->mac));
        struct setting s = {.type = IFLA_VF_MAC, .data = &m, .len = sizeof(m), .name = "mac"};
        char text[NODE_VFLINK_MAC_STR];
        node_vflink_mac_format(w->mac, text);
        (void)snprintf(s.what, sizeof(s.what), "mac %s", text);
        if ((k = set_one(ifname, driver, w->index, &s, ret_err)) < 0)
            return k;
    }
    if (w->vlan >= 0) {
        const struct ifla_vf_vlan v = {
                .vf = vf, .vlan = (uint32_t)w->vlan, .qos = w->qos > 0 ? (uint32_t)w->qos : 0};
        struct setting s = {.type = IFLA_VF_VLAN, .data = &v, .len = sizeof(v), .name = "vlan"};
        (void)snprintf(s.what, sizeof(s.what), "vlan %u qos %u", v.vlan, v.qos);
        if ((k = set_one(ifname, driver, w->index, &s, ret_err)) < 0)
            return k;
    }
    if (w->spoofchk >= 0 && (k = set_flag(ifname, driver, w->index, IFLA_VF_SPOOFCHK, "spoofchk",
                                          w->spoofchk, ret_err)) < 0)
        return k;
    if (w->trust >= 0 &&
        (k = set_flag(ifname, driver, w->index, IFLA_VF_TRUST, "trust", w->trust, ret_err)) < 0)
        return k;
    return 0;
}

static const char mac_example[] = "e.g. 02:00:00:00:00:01";

/* Whether `mac` may be a VF's address: unicast and not all zeros. */
static int check_mac(const uint8_t mac[6], const char *text, struct err *ret_err)
{
    static const uint8_t zero[6];
    if (mac[0] & 1)
        return err_set(ret_err, -EINVAL,
                       "mac %s is a multicast address (the first byte is odd): write a unicast "
                       "one, %s",
                       text, mac_example);
    if (memcmp(mac, zero, sizeof(zero)) == 0)
        return err_set(ret_err, -EINVAL,
                       "mac %s is no address: write a unicast one, %s, or leave mac out to keep "
                       "the driver's",
                       text, mac_example);
    return 0;
}

int node_vflink_want_check(const struct node_vflink_want *w, struct err *ret_err)
{
    if (w->index < 0)
        return err_set(ret_err, -EINVAL, "VF index %d: write 0 or more", w->index);
    if (w->vlan > 4095)
        return err_set(ret_err, -EINVAL, "vlan %d: write 0 (none) to 4095", w->vlan);
    if (w->qos > 7)
        return err_set(ret_err, -EINVAL, "qos %d: write 0 to 7", w->qos);
    if (w->qos >= 0 && w->vlan < 0)
        return err_set(ret_err, -EINVAL, "qos %d without a vlan: the kernel sets them together",
                       w->qos);
    if (w->qos > 0 && w->vlan == 0)
        return err_set(ret_err, -EINVAL, "qos %d is a vlan priority: write a vlan from 1 to 4095",
                       w->qos);
    if (w->spoofchk > 1)
        return err_set(ret_err, -EINVAL, "spoofchk %d: write 0 (off) or 1 (on)", w->spoofchk);
    if (w->trust > 1)
        return err_set(ret_err, -EINVAL, "trust %d: write 0 (off) or 1 (on)", w->trust);
    if (w->has_mac) {
        char text[NODE_VFLINK_MAC_STR];
        node_vflink_mac_format(w->mac, text);
        return check_mac(w->mac, text, ret_err);
    }
    return 0;
}

bool node_vflink_satisfied(const struct node_vflink *have, const struct node_vflink_want *w)
{
    if (have->index != w->index)
        return false;
    if (w->has_mac && memcmp(have->mac, w->mac, sizeof(w->mac)) != 0)
        return false;
    if (w->vlan >= 0 && (have->vlan != w->vlan || have->qos != (w->qos > 0 ? w->qos : 0)))
        return false;
    if (w->spoofchk >= 0 && have->spoofchk != w->spoofchk)
        return false;
    return w->trust < 0 || have->trust == w->trust;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int node_vflink_mac_parse(const char *s, uint8_t mac[6], struct err *ret_err)
{
    uint8_t m[6];
    bool ok = strnlen(s, NODE_VFLINK_MAC_STR) == NODE_VFLINK_MAC_STR - 1;
    for (size_t i = 0; ok && i < 6; i++) {
        int hi = hex_digit(s[3 * i]), lo = hex_digit(s[3 * i + 1]);
        ok = hi >= 0 && lo >= 0 && (i == 5 || s[3 * i + 2] == ':');
        m[i] = ok ? (uint8_t)(hi << 4 | lo) : 0;
    }
    if (!ok)
        return err_set(ret_err, -EINVAL,
                       "mac \"%.40s\": write six pairs of hex digits separated by colons, %s", s,
                       mac_example);
    int k = check_mac(m, s, ret_err);
    if (k < 0)
        return k;
    memcpy(mac, m, sizeof(m));
    return 0;
}

void node_vflink_mac_format(const uint8_t mac[6], char buf[NODE_VFLINK_MAC_STR])
{
    (void)snprintf(buf, NODE_VFLINK_MAC_STR, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1],
                   mac[2], mac[3], mac[4], mac[5]);
}
