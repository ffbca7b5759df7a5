export {
  renderTeamContext,
  injectTeamContext,
  calledBySentence,
  returnsToSentence,
  TeamContextMarkers,
  TEAM_CONTEXT_HEADING,
  NO_ROLE,
  DELEGATION_RULE,
  CALLBACK_RULE,
} from './team-context';
export type { TeamMember, TeamContextInput } from './team-context';
