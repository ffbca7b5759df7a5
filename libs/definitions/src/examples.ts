/**
 * Seed 001's minimal working example (the loan gate) in Baton's YAML: the seed's agent blocks
 * as `---` documents after a project header. Used by the docs, the tests and the demo.
 */
export const LOAN_EXAMPLE_YAML = `project: loans
workflows:
  - name: loan_session
    version: 1
    entry: converse
    steps:
      - id: converse
        agent: Loan_Supervisor
        terminal: true
---
SUPERVISOR: Loan_Supervisor
GOAL: "Collect the applicant's income before any loan offer discussion"

MEMORY:
  session:
    - annual_income
      TYPE: number
      DESCRIPTION: "Annual income in whole currency units, collected by the income agent."

HANDOFF:
  - TO: Income_Capture_Agent
    WHEN: annual_income IS NOT SET
    SUMMARY: "Collect the applicant's annual income, then return."
    HISTORY: summary_only
    RETURN: true
    ON_RETURN:
      action: resume_intent
      MAP:
        annual_income: annual_income
    ON_FAILURE: RESPOND "I cannot collect your income details right now. Please try again later."

  - TO: Offer_Agent
    WHEN: annual_income IS SET
    PASS: [annual_income]
    SUMMARY: "The offer agent now owns the conversation."
    RETURN: false
---
AGENT: Income_Capture_Agent
GOAL: "Collect the annual income and return it to the supervisor"

GATHER:
  annual_income:
    PROMPT: "What is your annual income?"
    TYPE: number
    REQUIRED: true

COMPLETE:
  - WHEN: annual_income IS SET
    RESPOND: "Thanks. I have your income."

HANDOFF:
  - TO: Loan_Supervisor
    WHEN: "the customer asks about something other than income"
    SUMMARY: "Customer needs a different specialist."
    RETURN: false
---
AGENT: Offer_Agent
GOAL: "Explain loan offers based on the applicant's annual income"
`;
