export { neutralizeMentions, hasLiveMention, ZERO_WIDTH_SPACE } from './mentions';
export { selectNoticeRecipient, buildHumanActionNotice, renderNotice, NOTICE_EXCERPT_CHARS } from './notice';
export type { NoticeInput } from './notice';
