"""The ledger user's reasons for asking, by topic, and which topic each task template is about.

The reasons are what a person managing their own money says around a request ("the landlord wants the deposit
soon"). They name no account, amount, day, period or payee, and point at nothing ("it", "that"), so they add no value
a checker could read; the builder still checks every realisation (:mod:`toolwild.synth.voice`).
"""

from __future__ import annotations

__all__ = ["REASONS", "reasons", "topic_of"]

REASONS: dict[str, tuple[str, ...]] = {
    "look": (
        "the landlord wants the deposit soon",
        "I'm deciding whether to book a concert for my sister's birthday",
        "my sister asked to borrow some cash",
        "I want to see if a new laptop is realistic",
        "the insurance renewal letter just arrived",
        "I'm sitting down to plan the budget with my partner",
        "payday is still a while off",
        "I'm about to put down a deposit on a sofa",
        "the plumber's invoice came in higher than expected",
        "I'm trying to figure out how much cushion I have",
        "my accountant asked me for a quick snapshot",
        "I'm thinking about moving some money around",
        "we're planning a long weekend away",
        "the dentist wants payment up front",
        "my phone screen cracked and a repair isn't cheap",
        "I promised myself I'd stop guessing",
        "I have a feeling something is off",
        "the school wants the excursion fee soon",
        "I want to know before I say yes to a wedding invite",
        "I'm filling in a loan application",
        "my brother wants me to chip in for a gift",
        "the mortgage advisor needs a number from me",
        "I was lying awake doing sums in my head",
        "a friend is selling their bike and I'm tempted",
    ),
    "spend": (
        "I'm trying to cut back a little",
        "my partner thinks we're overdoing things",
        "I set myself a budget and want to know how I'm doing",
        "I have a hunch the numbers crept up",
        "I'm putting together a budget spreadsheet",
        "I'm comparing notes with a friend who tracks everything",
        "I promised to report back to my partner tonight",
        "I feel like I've been careless lately",
        "I want to see where the money actually goes",
        "my financial coach asked for the figure",
        "I'm deciding whether to cancel a couple of subscriptions",
        "prices seem to keep climbing",
        "I'm writing up our family budget",
        "my roommate and I split costs and I want to be fair",
        "I'm saving up for a new bike",
        "the budgeting app I tried was useless",
    ),
    "add": (
        "the paper is already fading in my wallet",
        "I'm clearing out my wallet",
        "I'd rather log things while I remember them",
        "I just got home and emptied my pockets",
        "my partner keeps asking me to log these right away",
        "I'm still standing at the counter",
        "the receipt is crumpled but readable",
        "I'm trying to keep the books current",
        "I keep forgetting these otherwise",
        "I'm sorting a pile of receipts on the kitchen table",
    ),
    "fix": (
        "I misread the receipt",
        "my eyes must have skipped a digit",
        "the statement from the bank disagrees with what I typed",
        "I double-checked against the statement",
        "I was typing too fast",
        "the receipt was smudged",
        "my partner spotted the mistake",
        "the store's app shows something different",
        "I want the books to match the statement exactly",
        "I only noticed when I reconciled",
    ),
    "move": (
        "I like my reports to be accurate",
        "my budget reports are off otherwise",
        "I'm tidying up my books",
        "the report looked odd to me",
        "I want my charts to make sense",
        "I'm cleaning up before my accountant looks",
    ),
    "learn": (
        "I'm new to plain-text accounting",
        "I'm still learning how Beancount works",
        "a friend set the books up for me and I never quite understood",
        "I want to understand my own books properly",
        "the docs lost me a bit",
        "I'm trying to explain the setup to my partner",
        "curiosity got the better of me",
        "I read a blog post about double-entry bookkeeping",
        "I never took an accounting class",
        "I'd like to stop feeling lost in the reports",
    ),
    "check": (
        "I'm a bit paranoid about mistakes",
        "last time something didn't save properly",
        "I want to be sure before I close the laptop",
        "I don't want surprises at tax time",
        "my accountant is picky",
        "better safe than sorry",
    ),
    "query": (
        "I'm practising my query skills",
        "I copied the query from a forum post",
        "I want the raw numbers for a spreadsheet",
    ),
}
"""Reasons per topic (clauses without an end mark)."""


_LIFE = (
    "the boiler is making a worrying noise",
    "my laptop is on its last legs",
    "we're thinking about getting a puppy",
    "the kids need new school shoes",
    "my insurance renewal is due",
    "I'm weighing up a gym membership",
    "the washing machine just died",
    "a friend's wedding is coming up",
    "I'm planning a surprise party for my partner",
    "the roof needs fixing after the storm",
    "I've been offered a place on a pottery course",
    "my niece's christening is coming up",
    "the council tax letter arrived",
    "I want to start an emergency fund",
    "we might redo the kitchen",
    "my phone contract is up for renewal",
    "I'm looking at a cheaper broadband deal",
    "the vet bill for the cat was steep",
    "my parents' anniversary present needs buying",
    "I'm considering a weekend in Lisbon",
    "the landlord mentioned an increase",
    "I need new glasses",
    "I'm thinking of switching jobs",
    "a festival pass went on sale",
    "my tax return is due soon",
    "we're saving for a deposit on a flat",
    "my partner's birthday is coming up",
    "the dishwasher is leaking",
    "I want to pay off the student loan faster",
    "my sister's hen party is being planned",
    "the kids want a trampoline",
    "I've started meal planning",
    "the tyres need replacing",
    "I'm signing up for a marathon",
    "I fancy a new camera",
    "my flatmate is moving out",
    "I'm about to start a new job",
    "the electricity company raised its prices",
    "I'm planning a garden makeover",
    "my wisdom tooth needs pulling",
    "I promised the kids a day at the zoo",
    "I'm looking into a pension top-up",
    "the dog needs a new harness and a check-up",
    "we're hosting the family for the holidays",
    "I want to give something to the local shelter",
    "the bike shop quoted me for a repair",
    "I'm thinking of learning the piano",
    "my old coat finally fell apart",
    "my grandmother's ninetieth is in a few days",
    "the hot water keeps cutting out",
    "we're fostering a kitten",
    "I just signed up for evening classes in Spanish",
    "a parking fine turned up in the post",
    "I'm finally getting the piano tuned",
    "my nephew wants a drum kit for his birthday",
    "the lease on the car is ending",
    "I'm booking flights to see my parents",
    "the gutters need clearing before winter",
    "I'm redecorating the spare room",
    "the orthodontist quoted for braces",
    "my bike got stolen outside the library",
    "our neighbours are selling their hot tub",
    "I want to surprise my mum with a spa day",
    "the fence blew down in the wind",
    "I've been eyeing a second-hand kayak",
    "my daughter starts university soon",
    "the freezer is on its way out",
    "I'm trying to get ahead before the holidays",
    "a job interview means new clothes",
    "we're thinking of a loft conversion",
    "the cat needs her vaccinations",
    "I'm taking a sabbatical",
    "my best friend is moving abroad and I want to visit",
    "the garage door motor failed",
    "I'd like to sponsor a colleague's charity run",
    "our anniversary is coming up and I want something special",
    "I'm paying for a language exam",
    "the printer ink costs a fortune",
    "I'm planning a camping weekend in the hills",
    "the windows need resealing",
    "I'm thinking about solar panels",
    "my watch needs a new battery and a strap",
    "the baby needs a bigger cot",
    "I've been asked to be a bridesmaid",
    "our old sofa is falling apart",
    "I just got a pay rise and want to plan well",
    "my brother's stag weekend is being organised",
    "I'm looking at a course in woodworking",
    "the smoke alarm needs replacing",
    "I'm helping my parents with a new boiler",
    "a friend recommended a financial planner",
    "the guinea pigs need a new hutch",
    "I'm considering a standing desk",
    "the shower is leaking into the kitchen ceiling",
    "I entered a photography competition with a fee",
    "my son wants to join the football club",
    "I keep getting letters about my pension",
    "I'm thinking about a charity donation before the tax deadline",
)
"""Things going on in a person's life that make them look at their money (balances and spending alike)."""

_MORE: dict[str, tuple[str, ...]] = {
    "learn": (
        "my book club got talking about budgeting",
        "a podcast mentioned double-entry bookkeeping",
        "I'm teaching my teenager about money",
        "I want to write a blog post on how I track money",
        "my accountant used jargon I didn't follow",
        "I'm moving over from a spreadsheet",
        "I saw a forum thread about plain-text accounting",
        "I'm studying for a bookkeeping certificate",
        "my partner asked me and I had no answer",
    ),
    "fix": (
        "the refund email shows something else",
        "my partner read the receipt differently",
        "the printer at the till was running out of ink",
        "I swapped two digits",
        "autocorrect mangled what I typed",
        "I entered the figure from memory",
        "the tip wasn't included when I typed",
        "I was half asleep when I entered the figure",
    ),
    "move": (
        "my accountant asked for cleaner records",
        "the pie chart looks wrong",
        "I'm getting ready for tax season",
        "I want the yearly summary to be right",
        "consistency matters to me",
    ),
    "add": (
        "I'm trying a new habit of logging on the spot",
        "the receipt is going to get lost otherwise",
        "I'm at the bus stop with a minute to spare",
        "my wallet is bursting with paper",
        "I snapped a photo of the receipt",
    ),
    "check": (
        "I'm handing the books to my accountant",
        "a backup failed recently",
        "my laptop battery is nearly dead",
        "I'm about to log off",
        "I've been burned by sync problems before",
    ),
}
"""More reasons per topic (added to :data:`REASONS`; every topic but the questions about how the books work also
takes :data:`_LIFE`)."""

_PEOPLE = (
    "my sister",
    "my landlord",
    "my boss",
    "our neighbour",
    "my dad",
    "my flatmate",
    "my partner",
    "a colleague",
    "my daughter",
    "my son",
    "my best friend",
    "grandma",
    "my accountant",
    "my brother-in-law",
    "the babysitter",
    "my mum",
)
_HAPPENINGS: dict[str, tuple[str, ...]] = {
    "look": (
        "asked to borrow some cash",
        "is getting married in the spring",
        "wants to go halves on a birthday present",
        "suggested a weekend at the coast",
        "keeps asking whether we can afford a second car",
        "just sent me an invoice for the boiler repair",
        "wants the deposit for the holiday cottage",
        "thinks we should upgrade the washing machine",
        "is organising a ski weekend",
        "asked me to cover the concert",
        "needs help with a tuition payment",
        "wants to split the cost of a new fridge",
    ),
    "spend": (
        "says I buy far too much takeaway",
        "bet me I couldn't stick to a budget",
        "asked how we're doing against the plan",
        "started a no-buy challenge and roped me in",
        "is helping me plan for a baby",
        "thinks the streaming subscriptions add up",
        "wants us to save for a house",
        "keeps teasing me about my takeaway habit",
        "asked for numbers for the family budget meeting",
        "is convinced we waste money on impulse buys",
    ),
    "add": (
        "handed me a stack of receipts",
        "keeps nagging me to log receipts straight away",
        "found a receipt in the car door",
        "stuffed a receipt in my coat pocket",
        "reminded me to keep the books up to date",
        "gave me the receipt from the weekend",
    ),
    "fix": (
        "spotted a typo in my entries",
        "read the receipt out differently",
        "checked the bank statement with me",
        "noticed the totals didn't match",
        "asked why the numbers looked strange",
    ),
    "move": (
        "asked why the reports looked lopsided",
        "is reviewing the books with me",
        "wants cleaner reports for the tax return",
        "pointed out a mislabelled entry",
    ),
    "learn": (
        "asked me a question I couldn't answer",
        "uses Beancount too and swears by the tool",
        "set up these books for me years ago",
        "is trying plain-text accounting as well",
        "asked me to explain my setup",
        "thinks double-entry bookkeeping is overkill",
    ),
    "check": (
        "lost an afternoon's work once to a bad save",
        "made me promise to double-check everything",
        "will look over the books this weekend",
        "is very particular about the records",
    ),
}
"""What people around the user do that makes them ask, per topic (each said of two of :data:`_PEOPLE`: more people
would add letters, not meaning)."""


def reasons() -> dict[str, tuple[str, ...]]:
    """Every reason per topic: the fixed ones, the topic's further ones, life events (for the topics they fit) and
    the happenings of the topic, each said of two people."""
    out = {}
    for topic, fixed in REASONS.items():
        happenings = _HAPPENINGS.get(topic, ())
        made = tuple(
            f"{_PEOPLE[(3 * k + shift) % len(_PEOPLE)]} {what}" for k, what in enumerate(happenings) for shift in (0, 7)
        )
        life = _LIFE if topic in ("look", "spend", "add", "fix", "move") else ()
        out[topic] = fixed + _MORE.get(topic, ()) + life + made
    return out


_TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("learn", ("concept", "explain", "account_kinds", "how_to_fix", "greeting")),
    ("check", ("category_check", "confirm_write")),
    ("query", ("run_query",)),
    ("add", ("add", "two_adds")),
    ("fix", ("amend", "delete", "find_amend", "find_delete", "spend_and_fix")),
    ("move", ("recategorize", "find_recategorize", "find_two_then_move")),
    ("spend", ("spend", "two_spendings", "recall_spending", "memo_", "find", "list_accounts")),
)


def topic_of(template: str) -> str:
    """The topic of a task template (the reasons that fit it); balances and anything else: ``look``."""
    for topic, prefixes in _TOPICS:
        if template.startswith(prefixes):
            return topic
    return "look"
