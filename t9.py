from harness import *
import sys
P = ["remove_dropout", "fuse_conv_bn", "simplify_algebra", "fold_constants", "eliminate_common_subexpressions",
     "eliminate_dead_code", "inference", "training", "cleanup"]
class Tied(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(10, 4); s.head = nn.Linear(4, 10, bias=False); s.head.weight = s.emb.weight
        s.shared = nn.Linear(4, 4); s.a = s.shared; s.bait = Bait()
    def forward(s, i):
        h = s.emb(i).mean(1)
        h = s.a(s.shared(h))
        return s.head(s.bait(h))
class ViewBufs(nn.Module):
    def __init__(s):
        super().__init__(); s.bait = Bait()
        base = torch.randn(4, 8)
        s.register_buffer("base", base); s.register_buffer("half", base[:, :4])  # view of base
        s.register_buffer("nc", torch.randn(4, 4).t())  # non-contiguous
        s.register_buffer("stats", torch.zeros(4))
        s.lin = nn.Linear(4, 4)
    def forward(s, x):
        s.half.mul_(0.9)          # writes base through a view buffer
        s.stats.add_(x.detach().mean(0))
        y = s.lin(x) + x @ s.nc + s.base[:, 4:].sum(1)
        return s.bait(y)
class WriteParamView(nn.Module):
    def __init__(s):
        super().__init__(); s.w = nn.Parameter(torch.randn(4, 4)); s.bait = Bait()
    def forward(s, x):
        with torch.no_grad():
            s.w[0].zero_()
        return s.bait(x @ s.w.t())
class UnusedWritten(nn.Module):
    """a buffer only written, never read for the output"""
    def __init__(s):
        super().__init__(); s.lin = nn.Linear(4, 4); s.bait = Bait()
        s.register_buffer("seen", torch.zeros(4))
    def forward(s, x):
        s.seen.copy_(x[0])
        return s.bait(s.lin(x))
i = torch.randint(0, 10, (3, 5)); x = torch.randn(3, 4); xg = torch.randn(3, 4, requires_grad=True)
for n, mk, inp in [("tied", Tied, (i,)), ("viewbufs", ViewBufs, (x,)), ("viewbufs/xg", ViewBufs, (xg,)), ("writeparamview", WriteParamView, (x,)), ("unusedwritten", UnusedWritten, (x,))]:
    for train in (False, True):
        check(f"{n}/t={train}", lambda: mk().train(train), inp, passes=P, quiet=True, modes=("grad", "no_grad"))
summary()
